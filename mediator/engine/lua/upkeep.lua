-- upkeep: the time-based work of one queue that must happen even when nobody receives:
-- promote due delayed messages, purge messages past retention, report dead-letter handovers
-- left unfinished, and put the queue's next upkeep in the shard's schedule (or take it out).
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] most messages to touch
-- ARGV[3] ms after which an outbox entry counts as abandoned
-- ARGV[4] the namespace's default settings (msgpack map, or '')
-- Returns (replies.UpkeepReply; codes replies.Found):
--   OK = 1         {1, now, next_due or -1, promoted, purged, <packed outbox entries>...}
--   NO_QUEUE = -1  {-1}  its schedule entry is dropped, and what it left behind reaped (see
--                  reap in _lib.lua; again at the next tick if there is more)
local Q = queue_keys(KEYS, 1)
local name, limit, grace = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if not exists(Q) then
  if has_leftovers(Q) and not reap(Q, name, now_ms(), limit) then
    redis.call('ZADD', Q.due, int(now_ms()), name)
  else
    redis.call('ZREM', Q.due, name)
  end
  return {-1}
end
local ret_ms = settings(Q, defaults_of(ARGV[4]), {'ret'}).ret
local now = now_ms()

local promoted, purged = promote(Q, now, ret_ms, limit)
if promoted > 0 then wake(Q.waiters, name, promoted, -1, now) end

-- Stream entries are in first-enqueue order except for promoted delayed messages, so the
-- walk stops at the first live entry; a late expired one is purged when it is received.
local head_t0 = nil
local touched = 0
while touched < limit do
  local batch = redis.call('XRANGE', Q.stream, '-', '+', 'COUNT', 100)
  if #batch == 0 then break end
  local stop = false
  for _, e in ipairs(batch) do
    local f = to_table(e[2])
    if now - tonumber(f.z) >= ret_ms then
      purge_entry(Q, e[1], f, 'exp', now)
      purged = purged + 1
      touched = touched + 1
    else
      head_t0 = tonumber(f.z)
      stop = true
      break
    end
  end
  if stop or #batch < 100 then break end
end
if promoted > 0 or purged > 0 then refresh_oldest(Q, name) end
if redis.call('EXISTS', Q.stream) == 1 then drop_stream_if_empty(Q, name) end

local out = {1, now, -1, promoted, purged}
local next_due = nil
local function consider(t) if t and (not next_due or t < next_due) then next_due = t end end
consider(first_score(Q.delayed))
if head_t0 then consider(head_t0 + ret_ms) end
if redis.call('HLEN', Q.outbox) > 0 then
  local scan = redis.call('HSCAN', Q.outbox, 0, 'COUNT', 100)
  local entries = scan[2]
  for i = 2, #entries, 2 do
    local value = entries[i]
    if string.sub(value, 1, 2) == 'x:' then
      -- A tombstone of a message deleted during its hand-over: kept long enough for any
      -- hand-over under way to see it, then forgotten.
      if now - tonumber(string.sub(value, 3)) >= 2 * grace then
        redis.call('HDEL', Q.outbox, entries[i - 1])
        if redis.call('HGET', Q.ids, entries[i - 1]) == 'x' then
          redis.call('HDEL', Q.ids, entries[i - 1])
        end
      end
    elseif now - tonumber(cmsgpack.unpack(value)[9]) >= grace then
      out[#out + 1] = value
    end
  end
  consider(now + grace)
end
if next_due then
  if next_due < now then next_due = now end
  redis.call('ZADD', Q.due, int(next_due), name)
  out[3] = next_due
else
  redis.call('ZREM', Q.due, name)
end
return out
