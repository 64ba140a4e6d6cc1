-- queue_update: replace a queue's settable configuration. Messages already hidden keep their
-- deadlines: only later receives use the new visibility timeout.
-- KEYS[1] cfg
-- ARGV[1] number of field/value pairs to set (k), ARGV[2 .. 1+2k] the pairs,
-- then the names of optional fields to remove
-- The queue's upkeep is brought forward to now, so a shorter retention takes effect at once.
-- Returns {1, previous dead letter queue or '', now}  updated
--         {0}                                          no such queue
local cfg = KEYS[1]
if redis.call('EXISTS', cfg) == 0 then return {0} end
local previous = redis.call('HGET', cfg, 'dlq') or ''
local k = tonumber(ARGV[1])
for i = 2, 1 + 2 * k, 2 do redis.call('HSET', cfg, ARGV[i], ARGV[i + 1]) end
for i = 2 + 2 * k, #ARGV do redis.call('HDEL', cfg, ARGV[i]) end
local now = now_ms()
redis.call('HSET', cfg, 'sched', string.format('%d', now))
return {1, previous, now}
