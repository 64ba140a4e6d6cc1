-- send: store messages in a queue, visible now or after the queue's delay.
-- KEYS[1] cfg  KEYS[2] stream  KEYS[3] delayed  KEYS[4] delayed bodies  KEYS[5] ids
-- KEYS[6] waiters (the nodes waiters on the queue, see wake in _lib.lua)
-- ARGV[1] qualified queue name
-- ARGV[2] k = number of config field/value pairs that follow; with k > 0 a missing queue is
--         created with them (lazy creation)
-- ARGV[3 .. 2+2k] config pairs
-- then 5 values per message: id, content type, content encoding, trace id, body
-- Returns {1, now, sched, visible, delayed}  sched = new upkeep time (ms) or -1
--         {-1}             no such queue
--         {-2, i, size}    message i (1-based) is over the message size limit
--         {-3, count}      the message count limit would be passed (count = current)
--         {-4, bytes}      the size limit would be passed (bytes = current)
--         {-5}             the queue refuses messages (will_queue false)
local cfg, stream, delayed, dbody, ids, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local name = ARGV[1]
local k = tonumber(ARGV[2])
local first = 3 + 2 * k
local now = now_ms()

if redis.call('EXISTS', cfg) == 0 then
  if k == 0 then return {-1} end
  for i = 3, 2 + 2 * k, 2 do redis.call('HSET', cfg, ARGV[i], ARGV[i + 1]) end
  redis.call('HSET', cfg, 'created', string.format('%d', now), 'bytes', 0)
end

local c = redis.call('HMGET', cfg, 'ret', 'dly', 'lim_n', 'lim_b', 'lim_mb', 'wq', 'bytes')
if c[6] == '0' then return {-5} end
local n = (#ARGV - first + 1) / 5
local total = 0
local lim_mb = tonumber(c[5])
for i = 0, n - 1 do
  local size = #ARGV[first + 5 * i + 4]
  if lim_mb and size > lim_mb then return {-2, i + 1, size} end
  total = total + size
end
if c[3] then
  local count = redis.call('XLEN', stream) + redis.call('ZCARD', delayed)
  if count + n > tonumber(c[3]) then return {-3, count} end
end
local bytes = tonumber(c[7]) or 0
if c[4] and bytes + total > tonumber(c[4]) then return {-4, bytes} end

local delay_ms = (tonumber(c[2]) or 0) * 1000
local due = now + delay_ms
for i = 0, n - 1 do
  local base = first + 5 * i
  local m = {ARGV[base], ARGV[base + 1], ARGV[base + 2], ARGV[base + 3], now, ARGV[base + 4]}
  if delay_ms > 0 then
    redis.call('ZADD', delayed, due, m[1])
    redis.call('HSET', dbody, m[1], cmsgpack.pack(m))
    redis.call('HSET', ids, m[1], 'd')
  else
    redis.call('HSET', ids, m[1], stream_add(stream, m))
  end
end
add_bytes(cfg, total)
redis.call('HSET', cfg, 'la', string.format('%d', now))

local upkeep = now + tonumber(c[1]) * 1000
if delay_ms > 0 and due < upkeep then upkeep = due end
local sched = reschedule(cfg, upkeep)
if delay_ms > 0 then
  wake(waiters, name, 0, due, now)
  return {1, now, sched, 0, n}
end
wake(waiters, name, n, -1, now)
return {1, now, sched, n, 0}
