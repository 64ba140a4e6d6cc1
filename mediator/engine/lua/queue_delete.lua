-- queue_delete: delete a queue and all its messages, unless other queues still use it as
-- their dead letter queue.
-- KEYS[1..9] cfg, stream, inflight, receive counts, delayed, delayed bodies, ids, outbox,
-- waiters  KEYS[10] refs (queues using this one as dead letter queue)
-- Returns {1, own dead letter queue or ''}  deleted
--         {0}                              no such queue
--         {2, user, ...}                   still used as a dead letter queue by these
local cfg = KEYS[1]
if redis.call('EXISTS', cfg) == 0 then return {0} end
local users = redis.call('SMEMBERS', KEYS[10])
if #users > 0 then
  table.insert(users, 1, 2)
  return users
end
local dlq = redis.call('HGET', cfg, 'dlq') or ''
redis.call('DEL', unpack(KEYS))
return {1, dlq}
