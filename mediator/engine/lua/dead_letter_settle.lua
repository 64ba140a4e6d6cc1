-- dead_letter_settle: forget a dead-lettered message in its source queue once its dead
-- letter queue holds it, and record where it went (delete by id follows it there until
-- `forget_at`). All keys are the source queue's shard's.
-- KEYS[1] ids  KEYS[2] dead-letter outbox  KEYS[3] the shard's forwarding entries (moved)
-- KEYS[4] their expiry (moved-exp)  KEYS[5] the shard's schedule
-- ARGV[1] message id  ARGV[2] qualified name of the dead letter queue  ARGV[3] forget_at (ms)
-- ARGV[4] the schedule member of expired forwarding entries (keys.MOVED_MEMBER)
-- Returns (replies.SettleReply; codes replies.SettleCode):
--   SETTLED = 1          {1, hint}  settled now (hint: the shard's new earliest due, or -1)
--   ALREADY_SETTLED = 2  {2, -1}    by another hand-over of the same entry: nothing to do
--   DELETED = 0          {0, -1}    deleted by id while it was being handed over (its id is
--                        `x`): the caller deletes it in the dead letter queue too
local ids, outbox, moved, moved_exp = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local id = ARGV[1]
local loc = redis.call('HGET', ids, id)
if loc == 'x' then
  redis.call('HDEL', outbox, id)
  redis.call('HDEL', ids, id)
  return {0, -1}
end
if loc ~= 'o' then return {2, -1} end
redis.call('HDEL', outbox, id)
redis.call('HDEL', ids, id)
if ARGV[3] == '0' then return {1, -1} end  -- the dead letter queue is gone: nothing to record
redis.call('HSET', moved, id, ARGV[2])
redis.call('ZADD', moved_exp, ARGV[3], id)
return {1, schedule({due = KEYS[5]}, ARGV[4], tonumber(ARGV[3]))}
