-- queue_update: replace a queue's settable configuration. Messages already hidden keep their
-- deadlines: only later receives use the new visibility timeout.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] number of field/value pairs to set (k),
-- ARGV[3 .. 2+2k] the pairs, then the names of optional fields to remove
-- The queue's upkeep is brought forward to now, so a shorter retention takes effect at once.
-- Returns (replies.QueueUpdateReply; codes replies.QueueUpdateCode):
--   UPDATED = 1   {1, previous dead letter queue or '', hint}
--   NO_QUEUE = 0  {0}
local Q = queue_keys(KEYS, 1)
if not exists(Q) then return {0} end
local previous = redis.call('HGET', Q.cfg, 'dlq') or ''
local k = tonumber(ARGV[2])
for i = 3, 2 + 2 * k, 2 do redis.call('HSET', Q.cfg, ARGV[i], ARGV[i + 1]) end
for i = 3 + 2 * k, #ARGV do redis.call('HDEL', Q.cfg, ARGV[i]) end
return {1, previous, schedule(Q, ARGV[1], now_ms())}
