-- adopt: take a queue moved in from key layout 1 into its shard's books, once (mediator
-- migrate): its config fields, registry entry, counts, in-flight deadlines, oldest entry and
-- next upkeep. A second call (a migration run again after a stop) sets the fields again and
-- counts nothing twice.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] when its next upkeep is due (ms), or '' for now
-- ARGV[3..] config field/value pairs
-- Returns (replies.adopted; codes replies.AdoptCode):
--   COUNTED = 1         counted now
--   COUNTED_BEFORE = 0  it was counted before (its fields are set again)
local Q = queue_keys(KEYS, 1)
local name = ARGV[1]
if #ARGV > 2 then redis.call('HSET', Q.cfg, unpack(ARGV, 3)) end
if redis.call('SADD', Q.reg, short_name(name)) == 0 then return 0 end
local now = now_ms()
count(Q, 'q', 1)
local stored = redis.call('XLEN', Q.stream)
local delayed = redis.call('ZCARD', Q.delayed)
count(Q, 'n', stored)
count(Q, 'd', delayed)
local bytes = tonumber(redis.call('HGET', Q.cfg, 'bytes')) or 0
if bytes ~= 0 then redis.call('HINCRBY', Q.tot, 'b', int(bytes)) end
local hidden = redis.call('ZRANGEBYSCORE', Q.inflight, '(' .. int(now), '+inf', 'WITHSCORES')
for i = 2, #hidden, 2 do flight_add(Q, tonumber(hidden[i]), 1, now) end
refresh_oldest(Q, name)
if stored + delayed + redis.call('HLEN', Q.outbox) > 0 then
  local due = tonumber(ARGV[2]) or now
  redis.call('ZADD', Q.due, 'LT', int(due), name)
end
return 1
