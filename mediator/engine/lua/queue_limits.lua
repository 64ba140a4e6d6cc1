-- queue_limits: set a queue's limits and retention (DIDComm Queue Management updates).
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] retention ms  ARGV[2] will_queue '1'/'0'  ARGV[3] visibility timeout ms or ''
-- ARGV[4] count limit  ARGV[5] size limit  ARGV[6] message size limit ('' = none)
-- ARGV[7] qualified queue name
-- The upkeep is brought forward to now, so a shorter retention applies at once.
-- Returns (replies.queue_limits_hint; codes replies.Found):
--   OK = 1         {1, hint}
--   NO_QUEUE = -1  {-1}
local Q = queue_keys(KEYS, 1)
if not exists(Q) then return {-1} end
set_timer(Q, 'ret', ARGV[1])
redis.call('HSET', Q.cfg, 'wq', ARGV[2])
if ARGV[3] ~= '' then set_timer(Q, 'vt', ARGV[3]) end
local names = {'lim_n', 'lim_b', 'lim_mb'}
for i = 1, 3 do
  if ARGV[3 + i] == '' then
    redis.call('HSET', Q.cfg, names[i], '0')
  else
    redis.call('HSET', Q.cfg, names[i], ARGV[3 + i])
  end
end
return {1, schedule(Q, ARGV[7], now_ms())}
