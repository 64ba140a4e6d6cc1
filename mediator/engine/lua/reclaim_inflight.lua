-- reclaim_inflight: hand out again, with a new deadline, the messages of a queue that are
-- handed out and not acknowledged (a new live socket took over the recipient: what the old
-- socket carried is offered on the new one at once, not when the old deadline passes).
-- KEYS[1] stream  KEYS[2] inflight  KEYS[3] receive counts
-- ARGV[1] visibility timeout (ms)  ARGV[2] most to hand out
-- Returns as receive.lua: {1, now, -1, count, more, -1, <9 values per message>...}
local stream, inflight, rc = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local hidden_until = now + tonumber(ARGV[1])
local most = tonumber(ARGV[2])
local out = {1, now, -1, 0, 0, -1}
local hidden = redis.call('ZRANGEBYSCORE', inflight, '(' .. string.format('%d', now), '+inf',
  'LIMIT', 0, most + 1)
local got = 0
for i, sid in ipairs(hidden) do
  if i > most then out[5] = 1 break end
  local e = redis.call('XRANGE', stream, sid, sid)
  if #e == 0 then
    redis.call('ZREM', inflight, sid)
  else
    local receives = redis.call('HINCRBY', rc, sid, 1)
    redis.call('ZADD', inflight, hidden_until, sid)
    got = got + 1
    put_message(out, got, to_table(e[1][2]), receives, hidden_until, '')
  end
end
out[4] = got
return out
