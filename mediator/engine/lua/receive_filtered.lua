-- receive_filtered: hand out up to n visible messages that match a filter, oldest first, each
-- hidden until its visibility deadline. For DIDComm queues (no delay, no max receives, no
-- dead letter queue): Pickup 2.0's recipient_key, and live mode's "arrived after" cut-off.
-- New entries that do not match are "parked": left in the consumer group's PEL with an
-- in-flight score in the past (their enqueue time), which every other script reads as
-- visible, so plain receives hand them out in enqueue order.
-- KEYS[1..9] cfg, stream, inflight, receive counts, delayed, delayed bodies, ids, outbox,
--            waiting marker (as receive.lua)
-- ARGV[1] qualified queue name  ARGV[2] wake channel  ARGV[3] n
-- ARGV[4] visibility timeout ms, or '' for the queue's own
-- ARGV[5] trace id (recipient key) to match, or '' for any
-- ARGV[6] earliest first-enqueue time (ms) to match, or '' for any
-- ARGV[7] ms to keep the waiting marker when nothing matched ('0': no marker)
-- Returns as receive.lua: {1, now, next_due, count, more, -1, <9 values per message>...}
--         {-1}  no such queue
local cfg, stream, inflight, rc, delayed, dbody, ids, outbox, waiting =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local name, channel, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local c = redis.call('HMGET', cfg, 'vt', 'ret')
if not c[1] then return {-1} end
local now = now_ms()
local vt_ms = tonumber(c[1]) * 1000
if ARGV[4] ~= '' then vt_ms = tonumber(ARGV[4]) end
local ret_ms = tonumber(c[2]) * 1000
local tag = ARGV[5]
local min_z = tonumber(ARGV[6])

promote(cfg, stream, delayed, dbody, ids, now, ret_ms, 100)

local out = {1, now, -1, 0, 0, -1}
local got, examined = 0, 0
local BUDGET = 1000
local hidden_until = now + vt_ms

local function matches(f)
  if tag ~= '' and f.r ~= tag then return false end
  if min_z and tonumber(f.z) < min_z then return false end
  return true
end

local function deliver(sid, f)
  local receives = redis.call('HINCRBY', rc, sid, 1)
  redis.call('ZADD', inflight, hidden_until, sid)
  got = got + 1
  put_message(out, got, f, receives, hidden_until, '')
end

if redis.call('EXISTS', stream) == 1 then
  -- Messages already in the PEL and visible: deadline passed, released, or parked. With a
  -- cut-off, parked entries older than it (score = enqueue time) are not even looked at.
  local lo = '-inf'
  if min_z then lo = string.format('%d', min_z) end
  local visible = redis.call('ZRANGEBYSCORE', inflight, lo, now, 'LIMIT', 0, BUDGET)
  for _, sid in ipairs(visible) do
    if got >= n then break end
    examined = examined + 1
    local e = redis.call('XRANGE', stream, sid, sid)
    if #e == 0 then
      redis.call('ZREM', inflight, sid)
      redis.call('HDEL', rc, sid)
    else
      local f = to_table(e[1][2])
      if now - tonumber(f.z) >= ret_ms then
        purge_entry(cfg, stream, inflight, rc, ids, sid, f.i, #f.b)
      elseif matches(f) then
        deliver(sid, f)
      end
    end
  end
  while got < n and examined < BUDGET do
    local r = redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', 100, 'STREAMS', stream, '>')
    if not r then break end
    local entries = r[1][2]
    for _, e in ipairs(entries) do
      examined = examined + 1
      local f = to_table(e[2])
      if now - tonumber(f.z) >= ret_ms then
        purge_entry(cfg, stream, inflight, rc, ids, e[1], f.i, #f.b)
      elseif got < n and matches(f) then
        deliver(e[1], f)
      else
        redis.call('ZADD', inflight, tonumber(f.z), e[1])
      end
    end
    if #entries < 100 then break end
  end
  if got < n and examined >= BUDGET then out[5] = 1 end
  drop_stream_if_empty(stream, inflight, rc)
end

out[4] = got
if got > 0 then
  redis.call('HSET', cfg, 'ld', string.format('%d', now))
  if vt_ms > 0 then wake(waiting, channel, name, 0, hidden_until, now) end
elseif out[5] == 1 then
  out[3] = now
else
  local r = redis.call('ZRANGEBYSCORE', inflight, '(' .. string.format('%d', now), '+inf',
    'WITHSCORES', 'LIMIT', 0, 1)
  if #r > 0 then out[3] = tonumber(r[2]) end
  local marker_ms = tonumber(ARGV[7]) or 0
  if marker_ms > 0 then redis.call('SET', waiting, '1', 'PX', marker_ms) end
end
return out
