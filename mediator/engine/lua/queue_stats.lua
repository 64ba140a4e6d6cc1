-- queue_stats: counts of one queue at this instant (read only).
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name
-- Returns {1, now, stored, in flight (deadline not passed), delayed, oldest enqueue ms or -1,
--          bytes, next upkeep or -1, last added, last delivered, last removed (ms or -1),
--          newest enqueue ms or -1}
--   oldest/newest come from the stream's head and tail and the delayed set's first and last:
--   exact for queues without delay or dead-letter input (DIDComm queues), else close to it
--         {-1}  no such queue
local Q = queue_keys(KEYS, 1)
if not exists(Q) then return {-1} end
local c = redis.call('HMGET', Q.cfg, 'bytes', 'la', 'ld', 'lr')
local now = now_ms()
local stored = redis.call('XLEN', Q.stream)
local hidden = redis.call('ZCOUNT', Q.inflight, '(' .. int(now), '+inf')
local nd = redis.call('ZCARD', Q.delayed)
local oldest = -1
local head = redis.call('XRANGE', Q.stream, '-', '+', 'COUNT', 1)
if #head > 0 then oldest = tonumber(to_table(head[1][2]).z) end
local first = redis.call('ZRANGE', Q.delayed, 0, 0)
if #first > 0 then
  local packed = redis.call('HGET', Q.dbody, first[1])
  if packed then
    local t0 = tonumber(cmsgpack.unpack(packed)[5])
    if oldest < 0 or t0 < oldest then oldest = t0 end
  end
end
local newest = -1
local tail = redis.call('XREVRANGE', Q.stream, '+', '-', 'COUNT', 1)
if #tail > 0 then newest = tonumber(to_table(tail[1][2]).z) end
local last = redis.call('ZRANGE', Q.delayed, -1, -1)
if #last > 0 then
  local packed = redis.call('HGET', Q.dbody, last[1])
  if packed then
    local t1 = tonumber(cmsgpack.unpack(packed)[5])
    if t1 > newest then newest = t1 end
  end
end
local sched = redis.call('ZSCORE', Q.due, ARGV[1])
return {1, now, stored, hidden, nd, oldest, tonumber(c[1]) or 0, tonumber(sched) or -1,
  tonumber(c[2]) or -1, tonumber(c[3]) or -1, tonumber(c[4]) or -1, newest}
