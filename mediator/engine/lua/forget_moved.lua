-- forget_moved: drop the shard's dead-letter forwarding entries whose time has come, and put
-- the next expiry in the shard's schedule (or take the member out).
-- KEYS[1] moved  KEYS[2] moved-exp  KEYS[3] the shard's schedule
-- ARGV[1] the schedule member (keys.MOVED_MEMBER)  ARGV[2] most entries to drop
-- Returns the number dropped.
local moved, moved_exp, due = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local expired = redis.call('ZRANGEBYSCORE', moved_exp, '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
for _, id in ipairs(expired) do
  redis.call('HDEL', moved, id)
  redis.call('ZREM', moved_exp, id)
end
local next_at = first_score(moved_exp)
if next_at then
  redis.call('ZADD', due, int(math.max(next_at, now)), ARGV[1])
else
  redis.call('ZREM', due, ARGV[1])
end
return #expired
