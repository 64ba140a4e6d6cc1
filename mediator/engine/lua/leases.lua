-- leases: a worker's heartbeat and its share of the upkeep partitions, in one call.
-- KEYS[1] workers (sorted set: worker id -> heartbeat expiry, ms)
-- KEYS[2] leases (hash: partition -> "<worker id> <until ms>", mediator/engine/leases.py)
-- ARGV[1] worker id  ARGV[2] lease length (ms)  ARGV[3] number of partitions
-- ARGV[4] 'balance': heartbeat, renew what it holds, take free partitions up to its share
--         (ceil(partitions / live workers)) and give up those over it;
--         'release': give up every lease and leave the worker set
-- Returns (replies.held_partitions) the partitions the worker holds afterwards.
local workers, leases = KEYS[1], KEYS[2]
local me, lease_ms, partitions = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local now = now_ms()
local held = to_table(redis.call('HGETALL', leases))

if ARGV[4] == 'release' then
  for p, v in pairs(held) do
    if string.match(v, '^(%S+)') == me then redis.call('HDEL', leases, p) end
  end
  redis.call('ZREM', workers, me)
  return {}
end

redis.call('ZADD', workers, int(now + lease_ms), me)
redis.call('ZREMRANGEBYSCORE', workers, '-inf', int(now))
local live = math.max(1, redis.call('ZCARD', workers))
local target = math.ceil(partitions / live)
local until_ = me .. ' ' .. int(now + lease_ms)

local owned, free = {}, {}
-- Free partitions are taken from an offset of the worker's own, so that workers starting
-- together do not all reach for the same ones.
local start = tonumber(string.sub(redis.sha1hex(me), 1, 6), 16) % partitions
for i = 0, partitions - 1 do
  local p = (start + i) % partitions
  local v = held[tostring(p)]
  if v then
    local who, till = string.match(v, '^(%S+) (%d+)$')
    if who == me then
      owned[#owned + 1] = p
    elseif not till or tonumber(till) <= now then
      free[#free + 1] = p
    end
  else
    free[#free + 1] = p
  end
end
table.sort(owned)
while #owned > target do
  redis.call('HDEL', leases, tostring(table.remove(owned)))
end
for _, p in ipairs(free) do
  if #owned >= target then break end
  owned[#owned + 1] = p
end
for _, p in ipairs(owned) do redis.call('HSET', leases, tostring(p), until_) end
-- Partitions beyond the count (it was lowered) are forgotten.
for p, _ in pairs(held) do
  if tonumber(p) >= partitions then redis.call('HDEL', leases, p) end
end
table.sort(owned)
return owned
