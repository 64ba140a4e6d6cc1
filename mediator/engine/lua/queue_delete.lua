-- queue_delete: delete a queue and all its messages, unless other queues still use it as
-- their dead letter queue. The shard's books lose what the queue held (counted as dropped),
-- and its senders what they had queued in it.
-- KEYS: the queue's keys (keys.QueueKeys.all)  KEYS[15] refs (queues using it as their DLQ)
-- ARGV[1] qualified queue name
-- ARGV[2] '' to delete the config hash, else the config fields to remove (a DIDComm
--         connection's record is its queue's config hash and outlives the queue)
-- Returns (replies.QueueDeleteReply; codes replies.QueueDeleteCode):
--   DELETED = 1   {1, own dead letter queue or '', the schedule's hint for the workers or -1}
--   NO_QUEUE = 0  {0}
--   IN_USE = 2    {2, user, ...}  still used as a dead letter queue by these
local Q = queue_keys(KEYS, 1)
local name = ARGV[1]
if not exists(Q) then return {0} end
local users = redis.call('SMEMBERS', KEYS[15])
if #users > 0 then
  table.insert(users, 1, 2)
  return users
end
local now = now_ms()
local dlq = redis.call('HGET', Q.cfg, 'dlq') or ''
local stored = redis.call('XLEN', Q.stream)
local delayed = redis.call('ZCARD', Q.delayed)
local hidden = redis.call('ZRANGEBYSCORE', Q.inflight, '(' .. int(now), '+inf', 'WITHSCORES')
for i = 2, #hidden, 2 do flight_drop(Q, hidden[i], now) end
add_bytes(Q, -(tonumber(redis.call('HGET', Q.cfg, 'bytes')) or 0))
give_back_tally(Q, now)
count(Q, 'n', -stored)
count(Q, 'd', -delayed)
count(Q, 'drop', stored + delayed)
if redis.call('SREM', Q.reg, short_name(name)) == 1 then count(Q, 'q', -1) end
redis.call('ZREM', Q.old, short_name(name))
redis.call('ZREM', Q.due, name)
redis.call('DEL', Q.stream, Q.inflight, Q.rc, Q.delayed, Q.dbody, Q.ids, Q.outbox, Q.waiters,
  Q.dg)
if ARGV[2] == '' then
  redis.call('DEL', Q.cfg)
else
  redis.call('HDEL', Q.cfg, unpack(cmsgpack.unpack(ARGV[2])))
end
return {1, dlq, senders_due}
