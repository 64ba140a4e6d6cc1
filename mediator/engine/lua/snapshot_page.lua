#!lua flags=no-writes
-- snapshot_page: what a capacity snapshot reads of a page of one shard's queues. Read only
-- (the flag above), so replicas serve it with EVALSHA_RO. A queue's counts are
-- queue_counts' (_lib.lua), as queue_stats.lua reports them, at the server's clock.
-- mediator/engine/snapshot.py builds the call and decodes the reply (SnapshotPage).
-- KEYS[1] the shard's schedule (keys.shard_due), then 9 per queue, all in the shard's slot:
--   config hash, stream, in-flight set, receive counts, delayed set, delayed bodies, dead
--   letter users (refs), outbox, presence (keys.ConnectionKeys; an mqs queue has none and
--   passes its config hash again, unread)
-- ARGV[1] how many in-flight messages' receive counts to list per queue at most
-- then 2 per queue: its flags ('m' it may hold messages: the shard's oldest index or its
--   schedule names it; 'q' an mqs queue), its qualified name
-- Returns {now ms, commands run, then per queue:
--   {config hash (flat), presence or '', queue_counts' 12 values or {} when not marked 'm',
--    {receive counts of in-flight messages}, dead letter users or -1, outbox or -1}}
--   (an mqs queue's dead letter users and outbox are read; another's presence)

local QUEUE_COUNTS_CALLS = 9  -- the commands queue_counts runs; 2 more with delayed messages

local now = now_ms()
local listed = tonumber(ARGV[1])
local calls = 1
local out = {now, 0}

for i = 0, (#ARGV - 1) / 2 - 1 do
  local at = 1 + 9 * i
  local flags, name = ARGV[2 + 2 * i], ARGV[3 + 2 * i]
  local Q = {cfg = KEYS[at + 1], stream = KEYS[at + 2], inflight = KEYS[at + 3],
    rc = KEYS[at + 4], delayed = KEYS[at + 5], dbody = KEYS[at + 6], due = KEYS[1]}
  local mqs = string.find(flags, 'q', 1, true)
  local row = {redis.call('HGETALL', Q.cfg), '', {}, {}, -1, -1}
  calls = calls + 1
  if not mqs then
    row[2] = redis.call('GET', KEYS[at + 9]) or ''
    calls = calls + 1
  end
  if string.find(flags, 'm', 1, true) then
    local c = queue_counts(Q, name, now)
    row[3] = c
    calls = calls + QUEUE_COUNTS_CALLS
    if c[5] > 0 then calls = calls + 2 end
    if c[4] > 0 and listed > 0 then
      local ids = redis.call('ZRANGEBYSCORE', Q.inflight, '(' .. int(now), '+inf', 'LIMIT', 0,
        listed)
      local counts = redis.call('HMGET', Q.rc, unpack(ids))
      calls = calls + 2
      for j = 1, #counts do
        if counts[j] then row[4][#row[4] + 1] = tonumber(counts[j]) end
      end
    end
  end
  if mqs then
    row[5] = redis.call('SCARD', KEYS[at + 7])
    row[6] = redis.call('HLEN', KEYS[at + 8])
    calls = calls + 2
  end
  out[#out + 1] = row
end
out[2] = calls
return out
