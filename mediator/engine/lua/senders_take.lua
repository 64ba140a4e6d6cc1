-- senders_take: senders whose queued bytes in a shard changed (keys.shard_senders_changed),
-- with their totals in the shard (keys.shard_senders), for the worker to copy into their
-- counts (mediator/mediation/senders.py). They stay marked until senders_done; the
-- schedule's entry moves to `retry` ms, so that they are taken again if this worker dies.
-- KEYS[1] the shard's totals  KEYS[2] the changed senders  KEYS[3] the shard's schedule
-- ARGV[1] the schedule's member for them (keys.SENDERS_MEMBER)  ARGV[2] retry (ms)
-- ARGV[3] the most senders taken
-- Returns (replies.SenderTotal.decode_all) {tag, total, tag, total, ...} (total '0': none
--   left)
local tags = redis.call('SRANDMEMBER', KEYS[2], tonumber(ARGV[3]))
local out = {}
for _, tag in ipairs(tags) do
  out[#out + 1] = tag
  out[#out + 1] = redis.call('HGET', KEYS[1], tag) or '0'
end
if #tags > 0 then
  redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
else
  redis.call('ZREM', KEYS[3], ARGV[1])
end
return out
