-- dead_letter_settle: forget a dead-lettered message in its source queue once its dead letter
-- queue holds it.
-- KEYS[1] ids  KEYS[2] dead-letter outbox
-- ARGV[1] message id
-- Returns 1 settled now
--         2 already settled by another hand-over of the same entry: nothing to do
--         0 deleted by id while it was being handed over (its id is `x`): the caller deletes
--           it in the dead letter queue too
local ids, outbox = KEYS[1], KEYS[2]
local id = ARGV[1]
local loc = redis.call('HGET', ids, id)
if loc == 'o' then
  redis.call('HDEL', outbox, id)
  redis.call('HDEL', ids, id)
  return 1
end
if loc == 'x' then
  redis.call('HDEL', outbox, id)
  redis.call('HDEL', ids, id)
  return 0
end
return 2
