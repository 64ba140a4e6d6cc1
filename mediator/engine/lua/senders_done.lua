-- senders_done: the worker copied these senders' totals (senders_take): each is unmarked
-- unless its total changed meanwhile; the schedule's entry goes when none is left marked,
-- else it comes back to `next` ms at the latest.
-- KEYS[1] the shard's totals  KEYS[2] the changed senders  KEYS[3] the shard's schedule
-- ARGV[1] the schedule's member  ARGV[2] next (ms)  ARGV[3..] tag, total copied, ...
-- Returns 1, nothing to read.
for i = 3, #ARGV, 2 do
  if (redis.call('HGET', KEYS[1], ARGV[i]) or '0') == ARGV[i + 1] then
    redis.call('SREM', KEYS[2], ARGV[i])
  end
end
if redis.call('SCARD', KEYS[2]) == 0 then
  redis.call('ZREM', KEYS[3], ARGV[1])
else
  redis.call('ZADD', KEYS[3], 'LT', ARGV[2], ARGV[1])
end
return 1
