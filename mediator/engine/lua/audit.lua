-- audit: check a page of one shard's queues of one namespace and repair what a crash or an
-- older version left behind; everything here is normally kept exact by the other scripts.
-- KEYS[1] the shard's schedule  KEYS[2] the namespace's oldest index  KEYS[3] its registry
-- KEYS[4] its totals  then 6 keys per queue: cfg, stream, inflight, receive counts, delayed,
-- outbox
-- ARGV[1] namespace  ARGV[2..] the queue names (within the namespace), one per key group
-- Returns {checked, registry entries without a queue, schedules restored, oldest fixed,
--          empty streams dropped, <the names of the queues found gone>...}
local due, old, reg, tot = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local ns = ARGV[1]
local now = now_ms()
local out = {0, 0, 0, 0, 0}
for i = 2, #ARGV do
  local name = ARGV[i]
  local qualified = ns .. ':' .. name
  local at = 5 + 6 * (i - 2)
  local cfg, stream, inflight, rc, delayed, outbox =
    KEYS[at], KEYS[at + 1], KEYS[at + 2], KEYS[at + 3], KEYS[at + 4], KEYS[at + 5]
  out[1] = out[1] + 1
  if redis.call('HEXISTS', cfg, 'created') == 0 then
    if redis.call('SREM', reg, name) == 1 then
      redis.call('HINCRBY', tot, 'q', -1)
      out[2] = out[2] + 1
    end
    out[#out + 1] = name
    redis.call('ZREM', old, name)
    redis.call('ZREM', due, qualified)
  else
    local stored = redis.call('XLEN', stream)
    if stored == 0 and redis.call('EXISTS', stream) == 1 then
      redis.call('DEL', stream, inflight, rc)
      out[5] = out[5] + 1
    end
    local head = redis.call('XRANGE', stream, '-', '+', 'COUNT', 1)
    local indexed = redis.call('ZSCORE', old, name)
    if #head > 0 then
      local z = to_table(head[1][2]).z
      if not indexed or tonumber(indexed) ~= tonumber(z) then
        redis.call('ZADD', old, z, name)
        out[4] = out[4] + 1
      end
    elseif indexed then
      redis.call('ZREM', old, name)
      out[4] = out[4] + 1
    end
    local pending = stored + redis.call('ZCARD', delayed) + redis.call('HLEN', outbox)
    if pending > 0 and not redis.call('ZSCORE', due, qualified) then
      redis.call('ZADD', due, int(now), qualified)  -- its upkeep sets the real time
      out[3] = out[3] + 1
    end
  end
end
return out
