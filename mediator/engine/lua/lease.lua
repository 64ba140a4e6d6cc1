-- lease: take or renew a worker's lease on an upkeep shard, or give it up.
-- KEYS[1] lease key
-- ARGV[1] worker id  ARGV[2] 'take' or 'release'  ARGV[3] lease length in ms
-- Returns 1 when the caller holds the lease afterwards (take) or released it (release), else 0
local key, me, op = KEYS[1], ARGV[1], ARGV[2]
local holder = redis.call('GET', key)
if op == 'release' then
  if holder == me then redis.call('DEL', key) return 1 end
  return 0
end
if holder and holder ~= me then return 0 end
redis.call('SET', key, me, 'PX', tonumber(ARGV[3]))
return 1
