-- queue_limits: set a queue's limits and retention (DIDComm Queue Management updates).
-- KEYS[1] cfg
-- ARGV[1] retention seconds  ARGV[2] will_queue '1'/'0'  ARGV[3] visibility seconds or ''
-- ARGV[4] count limit  ARGV[5] size limit  ARGV[6] message size limit ('' = none)
-- Returns {1, now}  or {-1} no such queue
local cfg = KEYS[1]
if redis.call('EXISTS', cfg) == 0 then return {-1} end
redis.call('HSET', cfg, 'ret', ARGV[1], 'wq', ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', cfg, 'vt', ARGV[3]) end
local names = {'lim_n', 'lim_b', 'lim_mb'}
for i = 1, 3 do
  if ARGV[3 + i] == '' then
    redis.call('HDEL', cfg, names[i])
  else
    redis.call('HSET', cfg, names[i], ARGV[3 + i])
  end
end
return {1, now_ms()}
