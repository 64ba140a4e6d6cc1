-- reclaim_inflight: hand out again, with a new deadline, the messages of a queue that are
-- handed out and not acknowledged (a new live socket took over the recipient: what the old
-- socket carried is offered on the new one at once, not when the old deadline passes).
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] visibility timeout (ms)  ARGV[2] most to hand out
-- Returns as receive.lua (replies.Handout.decode; codes replies.ReceiveCode):
--   OK = 1  {1, now, -1, count, more, -1, <9 values per message>...}
local Q = queue_keys(KEYS, 1)
local now = now_ms()
local hidden_until = now + tonumber(ARGV[1])
local most = tonumber(ARGV[2])
local out = {1, now, -1, 0, 0, -1}
local hidden = redis.call('ZRANGEBYSCORE', Q.inflight, '(' .. int(now), '+inf',
  'WITHSCORES', 'LIMIT', 0, most + 1)
local got = 0
for i = 1, #hidden, 2 do
  local sid, score = hidden[i], hidden[i + 1]
  if got >= most then out[5] = 1 break end
  local e = redis.call('XRANGE', Q.stream, sid, sid)
  flight_drop(Q, score, now)
  if #e == 0 then
    redis.call('ZREM', Q.inflight, sid)
  else
    local receives = redis.call('HINCRBY', Q.rc, sid, 1)
    redis.call('ZADD', Q.inflight, hidden_until, sid)
    got = got + 1
    put_message(out, got, to_table(e[1][2]), receives, hidden_until, '')
  end
end
out[4] = got
if got > 0 then
  count(Q, 'dlv', got)
  flight_add(Q, hidden_until, got, now)
end
return out
