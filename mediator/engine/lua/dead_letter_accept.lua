-- dead_letter_accept: take a dead-lettered message into this (dead letter) queue, keeping its
-- id and first enqueue time; it becomes visible when its last visibility deadline passes.
-- Idempotent: a message id already here is not added twice.
-- KEYS: the dead letter queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] packed outbox entry
-- Returns (replies.AcceptReply; codes replies.AcceptCode):
--   ACCEPTED = 1      {1, hint, retention ms}  hint: the shard's new earliest due, or -1
--   ALREADY_HERE = 0  {0, -1, retention ms}
--   NO_QUEUE = -1     {-1}
local Q = queue_keys(KEYS, 1)
local name = ARGV[1]
if not exists(Q) then return {-1} end
local ret = settings(Q, nil, {'ret'}).ret
local e = cmsgpack.unpack(ARGV[2])
local id, visible_at = e[1], tonumber(e[7])
if redis.call('HEXISTS', Q.ids, id) == 1 then return {0, -1, ret} end
local now = now_ms()
redis.call('ZADD', Q.delayed, visible_at, id)
redis.call('HSET', Q.dbody, id, cmsgpack.pack({e[1], e[2], e[3], e[4], e[5], e[6]}))
redis.call('HSET', Q.ids, id, 'd')
add_bytes(Q, #e[6])
count(Q, 'd', 1)
count(Q, 'add', 1)
redis.call('HSET', Q.cfg, 'la', int(now))
local hint = schedule(Q, name, visible_at)
wake(Q.waiters, name, 0, visible_at, now)
return {1, hint, ret}
