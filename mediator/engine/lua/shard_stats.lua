-- shard_stats: one shard's totals, per namespace, for the workers' partition summaries;
-- in-flight seconds that have passed are pruned on the way.
-- KEYS: for each namespace, its totals, in-flight buckets and oldest index in the shard
-- (keys.shard_totals, shard_flight, shard_oldest)
-- Returns (replies.ShardStatsReply) {now, then per namespace 12 values: q, n, d, b, add,
--   dlv, ack, exp, dl, drop (books.COUNTERS), in flight now, oldest first enqueue ms or -1}
local FIELDS = {'q', 'n', 'd', 'b', 'add', 'dlv', 'ack', 'exp', 'dl', 'drop'}
local now = now_ms()
local out = {now}
for i = 1, #KEYS, 3 do
  local totals = redis.call('HMGET', KEYS[i], unpack(FIELDS))
  for j = 1, #FIELDS do out[#out + 1] = tonumber(totals[j]) or 0 end
  local flight = redis.call('HGETALL', KEYS[i + 1])
  local hidden, past = 0, {}
  for j = 1, #flight, 2 do
    if tonumber(flight[j]) * 1000 > now then
      hidden = hidden + tonumber(flight[j + 1])
    else
      past[#past + 1] = flight[j]
    end
  end
  if #past > 0 then redis.call('HDEL', KEYS[i + 1], unpack(past)) end
  out[#out + 1] = hidden
  out[#out + 1] = first_score(KEYS[i + 2]) or -1
end
return out
