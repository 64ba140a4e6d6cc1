-- queue_stats: counts of one queue at this instant (read only).
-- KEYS[1] cfg  KEYS[2] stream  KEYS[3] inflight  KEYS[4] delayed  KEYS[5] delayed bodies
-- KEYS[6] dead-letter outbox
-- Returns {1, now, stored, in flight (deadline not passed), delayed, oldest enqueue ms or -1,
--          bytes, sched or -1, last added, last delivered, last removed (ms or -1),
--          newest enqueue ms or -1}
--   oldest/newest come from the stream's head and tail and the delayed set's first and last:
--   exact for queues without delay or dead-letter input (DIDComm queues), else close to it
--         {-1}  no such queue
local cfg, stream, inflight, delayed, dbody, outbox =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local c = redis.call('HMGET', cfg, 'ret', 'bytes', 'sched', 'la', 'ld', 'lr')
if not c[1] then return {-1} end
local now = now_ms()
local stored = redis.call('XLEN', stream)
local hidden = redis.call('ZCOUNT', inflight, '(' .. string.format('%d', now), '+inf')
local nd = redis.call('ZCARD', delayed)
local oldest = -1
local head = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
if #head > 0 then oldest = tonumber(to_table(head[1][2]).z) end
local first = redis.call('ZRANGE', delayed, 0, 0)
if #first > 0 then
  local packed = redis.call('HGET', dbody, first[1])
  if packed then
    local t0 = tonumber(cmsgpack.unpack(packed)[5])
    if oldest < 0 or t0 < oldest then oldest = t0 end
  end
end
local newest = -1
local tail = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
if #tail > 0 then newest = tonumber(to_table(tail[1][2]).z) end
local last = redis.call('ZRANGE', delayed, -1, -1)
if #last > 0 then
  local packed = redis.call('HGET', dbody, last[1])
  if packed then
    local t1 = tonumber(cmsgpack.unpack(packed)[5])
    if t1 > newest then newest = t1 end
  end
end
return {1, now, stored, hidden, nd, oldest, tonumber(c[2]) or 0, tonumber(c[3]) or -1,
  tonumber(c[4]) or -1, tonumber(c[5]) or -1, tonumber(c[6]) or -1, newest}
