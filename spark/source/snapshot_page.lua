#!lua flags=no-writes
-- snapshot_page: what a capacity snapshot reads of a page of one shard's queues (read only:
-- it runs on replicas too, with EVALSHA_RO). Figures follow the engine's queue_counts
-- (mediator/engine/lua/_lib.lua) at the server's clock.
-- KEYS: 9 per queue, all in the queue's shard slot: config hash, stream, in-flight set,
--   receive counts, delayed set, delayed bodies, dead letter users, outbox, presence
-- ARGV[1] how many in-flight messages' receive counts to list per queue at most
-- ARGV[1 + i] queue i's flags: 'm' it may hold messages (oldest index or schedule), 'q' an
--   mqs queue (dead letter users and outbox; no presence)
-- Returns {now ms, commands run, then per queue:
--   {config hash (flat), presence or '', stored, oldest ms, newest ms, in flight,
--    {receive counts of in-flight messages}, delayed, dead letter users, outbox}}
--   (-1 where a time is unknown; stored, in flight and delayed 0 for a queue not marked 'm')

local calls = 0
local function call(...)
  calls = calls + 1
  return redis.call(...)
end

local function field(entry, name)
  local flat = entry[2]
  for i = 1, #flat, 2 do
    if flat[i] == name then return tonumber(flat[i + 1]) end
  end
  return nil
end

local function enqueued(bodies, id)
  local packed = call('HGET', bodies, id)
  if not packed then return nil end
  return tonumber(cmsgpack.unpack(packed)[5])
end

local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local listed = tonumber(ARGV[1])
local out = {now, 0}

for i = 2, #ARGV do
  local at = (i - 2) * 9
  local cfg, stream, inflight, rc, delayed, dbody, refs, outbox, presence =
    KEYS[at + 1], KEYS[at + 2], KEYS[at + 3], KEYS[at + 4], KEYS[at + 5], KEYS[at + 6],
    KEYS[at + 7], KEYS[at + 8], KEYS[at + 9]
  local flags = ARGV[i]
  local mqs = string.find(flags, 'q', 1, true)
  local held = ''
  if not mqs then held = call('GET', presence) or '' end
  local row = {call('HGETALL', cfg), held, 0, -1, -1, 0, {}, 0, -1, -1}
  if string.find(flags, 'm', 1, true) then
    row[3] = call('XLEN', stream)
    local head = call('XRANGE', stream, '-', '+', 'COUNT', 1)
    if #head > 0 then row[4] = field(head[1], 'z') or -1 end
    local tail = call('XREVRANGE', stream, '+', '-', 'COUNT', 1)
    if #tail > 0 then row[5] = field(tail[1], 'z') or -1 end
    local after = '(' .. string.format('%d', now)
    row[6] = call('ZCOUNT', inflight, after, '+inf')
    if row[6] > 0 then
      local ids = call('ZRANGEBYSCORE', inflight, after, '+inf', 'LIMIT', 0, listed)
      local counts = call('HMGET', rc, unpack(ids))
      for j = 1, #counts do
        if counts[j] then row[7][#row[7] + 1] = tonumber(counts[j]) end
      end
    end
    row[8] = call('ZCARD', delayed)
    if row[8] > 0 then
      local t0 = enqueued(dbody, call('ZRANGE', delayed, 0, 0)[1])
      if t0 and (row[4] < 0 or t0 < row[4]) then row[4] = t0 end
      local t1 = enqueued(dbody, call('ZRANGE', delayed, -1, -1)[1])
      if t1 and t1 > row[5] then row[5] = t1 end
    end
  end
  if mqs then
    row[9] = call('SCARD', refs)
    row[10] = call('HLEN', outbox)
  end
  out[#out + 1] = row
end
out[2] = calls
return out
