-- dead_letter_settle: forget a dead-lettered message in its source queue once its dead letter
-- queue holds it.
-- KEYS[1] ids  KEYS[2] dead-letter outbox
-- ARGV[1] message id
-- Returns 1 settled; 0 the message was deleted meanwhile (the caller deletes it in the
-- dead letter queue too).
local ids, outbox = KEYS[1], KEYS[2]
local id = ARGV[1]
if redis.call('HGET', ids, id) ~= 'o' then return 0 end
redis.call('HDEL', outbox, id)
redis.call('HDEL', ids, id)
return 1
