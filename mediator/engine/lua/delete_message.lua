-- delete_message: remove one message by id, wherever it is in the queue.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] message id
-- Returns {1}        deleted
--         {0}        not in this queue
--         {2, dlq}   it was on its way to dead letter queue `dlq`: its outbox entry becomes a
--                    tombstone `x:<ms>` and its id `x`, so that a hand-over under way learns of
--                    the delete (dead_letter_settle); the caller deletes it there too
local Q = queue_keys(KEYS, 1)
local name, id = ARGV[1], ARGV[2]
local loc = redis.call('HGET', Q.ids, id)
if not loc then return {0} end
local now = now_ms()
if loc == 'd' then
  local packed = redis.call('HGET', Q.dbody, id)
  redis.call('ZREM', Q.delayed, id)
  redis.call('HDEL', Q.dbody, id)
  redis.call('HDEL', Q.ids, id)
  if packed then
    add_bytes(Q, -#cmsgpack.unpack(packed)[6])
    count(Q, 'd', -1)
    count(Q, 'ack', 1)
  end
  redis.call('HSET', Q.cfg, 'lr', int(now))
  return {1}
end
if loc == 'x' then return {0} end
if loc == 'o' then
  local packed = redis.call('HGET', Q.outbox, id)
  redis.call('HSET', Q.outbox, id, 'x:' .. int(now))
  redis.call('HSET', Q.ids, id, 'x')
  if packed then return {2, cmsgpack.unpack(packed)[8]} end
  return {1}
end
local entry = redis.call('XRANGE', Q.stream, loc, loc)
if #entry == 0 then
  redis.call('HDEL', Q.ids, id)
  flight_drop(Q, redis.call('ZSCORE', Q.inflight, loc), now)
  redis.call('ZREM', Q.inflight, loc)
  redis.call('HDEL', Q.rc, loc)
  return {0}
end
local f = to_table(entry[1][2])
purge_entry(Q, loc, id, #f.b, 'ack', now)
refresh_oldest(Q, name)
drop_stream_if_empty(Q, name)
redis.call('HSET', Q.cfg, 'lr', int(now))
return {1}
