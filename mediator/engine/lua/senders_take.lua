-- senders_take: a shard's pending changes to its senders' queued bytes (keys.shard_senders),
-- taken for the worker to add to the senders' counts (mediator/mediation/senders.py), and
-- the shard's schedule entry for them removed: the next change schedules it again.
-- KEYS[1] the pending changes (hash: sender tag -> bytes)  KEYS[2] the shard's schedule
-- ARGV[1] the schedule's member for them (keys.SENDERS_MEMBER)
-- Returns {tag, bytes, tag, bytes, ...}
local changes = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return changes
