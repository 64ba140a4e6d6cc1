-- audit: check a page of one shard's queues of one namespace and repair what a crash or an
-- older version left behind; everything here is normally kept exact by the other scripts.
-- A queue whose config went without queue_delete (a DIDComm record that expired unmediated)
-- is reaped: its messages leave the books as dropped and its keys go (see reap in _lib.lua).
-- KEYS: 14 per queue, each queue's keys.QueueKeys.all
-- ARGV[1] namespace  ARGV[2..] the queue names (within the namespace), one per key group
-- Returns (replies.AuditReply) {checked, registry entries without a queue, schedules
--   restored, oldest fixed, empty streams dropped, <the names of the queues found gone>...}
local ns = ARGV[1]
local now = now_ms()
local out = {0, 0, 0, 0, 0}
for i = 2, #ARGV do
  local name = ARGV[i]
  local qualified = ns .. ':' .. name
  local Q = queue_keys(KEYS, 1 + 14 * (i - 2))
  local due, old, reg = Q.due, Q.old, Q.reg
  local cfg, stream, inflight, rc, delayed, outbox =
    Q.cfg, Q.stream, Q.inflight, Q.rc, Q.delayed, Q.outbox
  out[1] = out[1] + 1
  if not exists(Q) then
    if redis.call('SISMEMBER', reg, name) == 1 then out[2] = out[2] + 1 end
    if not reap(Q, qualified, now, 1000) then
      redis.call('ZADD', due, int(now), qualified)  -- its upkeep reaps the rest
    end
    out[#out + 1] = name
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
