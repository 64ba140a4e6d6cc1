-- queue_detach: stop a queue from using a dead letter queue that is being deleted
-- (cascade): its dead letter queue and max receives are cleared.
-- KEYS[1] cfg
-- ARGV[1] qualified name of the dead letter queue being deleted
-- Returns 1 detached, 0 it did not use that queue (or does not exist)
local cfg = KEYS[1]
if redis.call('HGET', cfg, 'dlq') ~= ARGV[1] then return 0 end
redis.call('HDEL', cfg, 'dlq', 'mr')
return 1
