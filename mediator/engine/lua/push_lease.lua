-- push_lease: one pusher at a time per connection (mediator/mediation/push.py), so that its
-- messages reach the endpoint in queue order however many nodes see forwards for it.
-- KEYS[1] the connection's push lease (string: the holder's id, '+' appended when another
--         pusher asked for it meanwhile)
-- ARGV[1] the caller's id  ARGV[2] the lease's length (ms)
-- ARGV[3] 'take': take it, or renew it when the caller holds it; else mark it, so that its
--                 holder pushes once more;
--         'give': the holder is done: it keeps the lease, renewed, for one more round when
--                 another asked meanwhile, else releases it;
--         'drop': the holder stops (a retry is scheduled): releases it.
-- Returns (replies.push_lease_held; codes replies.PushLeaseCode), every op:
--   HELD = 1      the caller holds the lease afterwards
--   NOT_HELD = 0  it does not (another holds it, or it was released)
local lease, me, ms, op = KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3]
local held = redis.call('GET', lease)
local mine = held == me or held == me .. '+'

if op == 'take' then
  if not held then
    redis.call('SET', lease, me, 'PX', ms)
    return 1
  end
  if mine then
    redis.call('PEXPIRE', lease, ms)
    return 1
  end
  if string.sub(held, -1) ~= '+' then redis.call('SET', lease, held .. '+', 'KEEPTTL') end
  return 0
end

if not mine then return 0 end
if op == 'give' and held == me .. '+' then
  redis.call('SET', lease, me, 'PX', ms)
  return 1
end
redis.call('DEL', lease)
return 0
