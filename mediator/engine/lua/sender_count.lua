-- sender_count: copy a sender's total in one shard into its count (keys.sender_queued: a hash
-- shard -> bytes, and `@` their sum: keys.SENDER_QUEUED_SUM). Safe to run twice: it sets,
-- it does not add.
-- KEYS[1] the sender's count  ARGV[1] shard  ARGV[2] its total there  ARGV[3] ttl (ms)
-- Returns (replies.SenderCount) {sum now, sum before}
local old = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
local new = tonumber(ARGV[2])
local before = tonumber(redis.call('HGET', KEYS[1], '@') or '0')
if old == new then return {before, before} end
if new > 0 then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
else
  redis.call('HDEL', KEYS[1], ARGV[1])
end
local sum = redis.call('HINCRBY', KEYS[1], '@', int(new - old))
if redis.call('HLEN', KEYS[1]) <= 1 then
  redis.call('DEL', KEYS[1])
  return {0, before}
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {sum, before}
