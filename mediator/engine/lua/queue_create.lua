-- queue_create: create a queue's configuration; its stream is made lazily on first send.
-- KEYS[1] cfg
-- ARGV field/value pairs
-- Returns 1 created, 0 a queue of that name exists
local cfg = KEYS[1]
if redis.call('EXISTS', cfg) == 1 then return 0 end
redis.call('HSET', cfg, unpack(ARGV))
redis.call('HSET', cfg, 'created', string.format('%d', now_ms()), 'bytes', 0)
return 1
