-- delete_message: remove one message by id, wherever it is in the queue.
-- KEYS[1] cfg  KEYS[2] stream  KEYS[3] inflight  KEYS[4] receive counts  KEYS[5] delayed
-- KEYS[6] delayed bodies  KEYS[7] ids  KEYS[8] dead-letter outbox  (KEYS[9] unused)
-- ARGV[1] message id
-- Returns {1}        deleted
--         {0}        not in this queue
--         {2, dlq}   it was on its way to dead letter queue `dlq`: its outbox entry becomes a
--                    tombstone `x:<ms>` and its id `x`, so that a hand-over under way learns of
--                    the delete (dead_letter_settle); the caller deletes it there too
local cfg, stream, inflight, rc, delayed, dbody, ids, outbox =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local id = ARGV[1]
local loc = redis.call('HGET', ids, id)
if not loc then return {0} end
if loc == 'd' then
  local packed = redis.call('HGET', dbody, id)
  redis.call('ZREM', delayed, id)
  redis.call('HDEL', dbody, id)
  redis.call('HDEL', ids, id)
  if packed then add_bytes(cfg, -#cmsgpack.unpack(packed)[6]) end
  redis.call('HSET', cfg, 'lr', string.format('%d', now_ms()))
  return {1}
end
if loc == 'x' then return {0} end
if loc == 'o' then
  local packed = redis.call('HGET', outbox, id)
  redis.call('HSET', outbox, id, 'x:' .. string.format('%d', now_ms()))
  redis.call('HSET', ids, id, 'x')
  if packed then return {2, cmsgpack.unpack(packed)[8]} end
  return {1}
end
local entry = redis.call('XRANGE', stream, loc, loc)
if #entry == 0 then
  redis.call('HDEL', ids, id)
  redis.call('ZREM', inflight, loc)
  redis.call('HDEL', rc, loc)
  return {0}
end
local f = to_table(entry[1][2])
purge_entry(cfg, stream, inflight, rc, ids, loc, id, #f.b)
drop_stream_if_empty(stream, inflight, rc)
redis.call('HSET', cfg, 'lr', string.format('%d', now_ms()))
return {1}
