-- dead_letter_accept: take a dead-lettered message into this (dead letter) queue, keeping its
-- id and first enqueue time; it becomes visible when its last visibility deadline passes.
-- Idempotent: a message id already here is not added twice.
-- KEYS[1] cfg  KEYS[2] delayed  KEYS[3] delayed bodies  KEYS[4] ids  KEYS[5] waiters
-- ARGV[1] qualified queue name  ARGV[2] packed outbox entry
-- Returns {1, sched, retention seconds}  accepted (sched = new upkeep time or -1)
--         {0, -1, retention seconds}     already here
--         {-1}                           no such queue
local cfg, delayed, dbody, ids, waiters = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local name = ARGV[1]
local ret = redis.call('HGET', cfg, 'ret')
if not ret then return {-1} end
local e = cmsgpack.unpack(ARGV[2])
local id, visible_at = e[1], tonumber(e[7])
if redis.call('HEXISTS', ids, id) == 1 then return {0, -1, tonumber(ret)} end
local now = now_ms()
redis.call('ZADD', delayed, visible_at, id)
redis.call('HSET', dbody, id, cmsgpack.pack({e[1], e[2], e[3], e[4], e[5], e[6]}))
redis.call('HSET', ids, id, 'd')
add_bytes(cfg, #e[6])
redis.call('HSET', cfg, 'la', string.format('%d', now))
local sched = reschedule(cfg, visible_at)
wake(waiters, name, 0, visible_at, now)
return {1, sched, tonumber(ret)}
