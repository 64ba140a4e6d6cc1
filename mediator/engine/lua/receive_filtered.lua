-- receive_filtered: hand out up to n visible messages that match a filter, oldest first, each
-- hidden until its visibility deadline. For DIDComm queues (no delay, no max receives, no
-- dead letter queue): Pickup 2.0's recipient_key, and live mode's "arrived after" cut-off.
-- New entries that do not match are "parked": left in the consumer group's PEL with an
-- in-flight score in the past (just below their stream id's time, see visible_score), which
-- every other script reads as visible, so plain receives hand them out in enqueue order.
-- Visible PEL entries are read in in-flight order from a cursor, the last entry a previous
-- call of the same receive examined and left visible, so a receive that needs several calls
-- (budget or n reached) moves on instead of reading the same backlog again. Entries that
-- become visible behind the cursor meanwhile are found by the next receive.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] this node's wake channel  ARGV[3] n
-- ARGV[4] visibility timeout ms, or '' for the queue's own
-- ARGV[5] trace id (recipient key) to match, or '' for any
-- ARGV[6] earliest first-enqueue time (ms) to match, or '' for any (a message handed out
--         before and due again matches whatever its time)
-- ARGV[7] ms this node waits on the queue when nothing matched ('0': it will not wait)
-- ARGV[8] cursor returned by the previous call of this receive, or '' to start
-- ARGV[9] the namespace's default settings (msgpack map, or '')
-- KEYS[15], ARGV[10], ARGV[11] (optional): a live socket's hold on its recipient, the socket
--         (`<node>/<socket>`) and the hold's new lifetime in ms: renewed here, or {-2}
-- ARGV[12] (optional, with a hold): '1' when the socket's delivery loop takes hand-offs: its
--         marker is renewed for ARGV[7] ms (_lib.lua's mark_live)
-- Returns (replies.Handout.decode_filtered; codes replies.ReceiveCode):
--   OK = 1          {1, now, next_due, count, more, cursor, <9 values per message>...,
--                   the queue's hand-offs so far (with ARGV[12] only)}
--   NO_QUEUE = -1   {-1}
--   HOLD_LOST = -2  {-2}  another socket holds the recipient now: nothing was handed out
--   as receive.lua (fewer than n and more 0: nothing else matched, and the node was marked
--   as waiting), except that slot 6 is the cursor to pass to the next call ('' = none)
local Q = queue_keys(KEYS, 1)
local name, channel, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not exists(Q) then return {-1} end
if not renew_hold(KEYS[15], ARGV[10], ARGV[11]) then return {-2} end
local c = settings(Q, defaults_of(ARGV[9]), {'vt', 'ret'})
local now = now_ms()
local vt_ms = c.vt
if ARGV[4] ~= '' then vt_ms = tonumber(ARGV[4]) end
local ret_ms = c.ret
local tag = ARGV[5]
local min_z = tonumber(ARGV[6])
-- With a cut-off, PEL scores below `lo` can only belong to messages enqueued before it.
local lo = min_z and (min_z - PARKED_SKEW_MS)
local cur_score, cur_sid = string.match(ARGV[8] or '', '^(%S+) (%S+)$')
cur_score = tonumber(cur_score)

local head_moved = promote(Q, now, ret_ms, 100) > 0

local out = {1, now, -1, 0, 0, ''}
local got, examined = 0, 0
local BUDGET = 1000  -- entries looked at per call, purged and skipped ones included
local hidden_until = now + vt_ms
local handed = nil
if ARGV[12] == '1' and vt_ms > 0 then
  handed = mark_live(Q.waiters, ARGV[10], channel, vt_ms, tonumber(ARGV[7]) or 0, now)
end

-- `sid` only for entries read from the PEL: new entries were never handed out. One handed
-- out before and due again unacknowledged matches whatever its arrival: the pickup round
-- that the cut-off leaves older messages to could not see it while it was handed out.
local function matches(f, sid)
  if tag ~= '' and f.r ~= tag then return false end
  if min_z and tonumber(f.z) < min_z then
    return sid ~= nil and redis.call('HEXISTS', Q.rc, sid) == 1
  end
  return true
end

local function deliver(sid, f)
  local receives = redis.call('HINCRBY', Q.rc, sid, 1)
  redis.call('ZADD', Q.inflight, hidden_until, sid)
  got = got + 1
  put_message(out, got, f, receives, hidden_until, '')
end

-- The cursor moves to an entry left visible when it sorts after the current one (entries
-- below the cut-off's bound are never read, so they need no cursor).
local function advance(sid, score)
  if lo and score < lo then return end
  if cur_sid and (score < cur_score or (score == cur_score and sid ~= cur_sid
      and redis.call('ZRANK', Q.inflight, sid) < (redis.call('ZRANK', Q.inflight, cur_sid) or -1)))
  then
    return
  end
  cur_score, cur_sid = score, sid
end

-- Visible PEL entries (deadline passed, released or parked) after the cursor, in order.
-- With a cut-off, parked entries enqueued well before it (see `lo`) are never read.
local function visible_pel()
  local flat
  if cur_sid and tonumber(redis.call('ZSCORE', Q.inflight, cur_sid)) == cur_score then
    local rank = redis.call('ZRANK', Q.inflight, cur_sid)
    flat = redis.call('ZRANGE', Q.inflight, rank + 1, rank + BUDGET, 'WITHSCORES')
  else
    -- The cursor entry was handed out or deleted meanwhile: resume after its score.
    local from = '-inf'
    if cur_score then
      from = '(' .. string.format('%.17g', cur_score)
    elseif lo then
      from = string.format('%d', lo)
    end
    flat = redis.call('ZRANGEBYSCORE', Q.inflight, from, now, 'WITHSCORES', 'LIMIT', 0, BUDGET)
  end
  local entries = {}
  for i = 1, #flat, 2 do
    local score = tonumber(flat[i + 1])
    if score > now then break end
    entries[#entries + 1] = {flat[i], score}
  end
  return entries
end

if redis.call('EXISTS', Q.stream) == 1 then
  for _, p in ipairs(visible_pel()) do
    if got >= n or examined >= BUDGET then break end
    examined = examined + 1
    local sid = p[1]
    local e = redis.call('XRANGE', Q.stream, sid, sid)
    if #e == 0 then
      redis.call('ZREM', Q.inflight, sid)
      redis.call('HDEL', Q.rc, sid)
    else
      local f = to_table(e[1][2])
      if now - tonumber(f.z) >= ret_ms then
        purge_entry(Q, sid, f, 'exp', now)
        head_moved = true
      elseif matches(f, sid) then
        deliver(sid, f)
      else
        advance(sid, p[2])
      end
    end
  end
  while got < n and examined < BUDGET do
    local want = math.min(100, BUDGET - examined)
    local r = redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', want, 'STREAMS', Q.stream, '>')
    if not r then break end
    local entries = r[1][2]
    for _, e in ipairs(entries) do
      examined = examined + 1
      local f = to_table(e[2])
      if now - tonumber(f.z) >= ret_ms then
        purge_entry(Q, e[1], f, 'exp', now)
        head_moved = true
      elseif got < n and matches(f) then
        deliver(e[1], f)
      else
        local score, arg = visible_score(e[1], now)
        redis.call('ZADD', Q.inflight, arg, e[1])
        -- Parked after n was reached, a matching entry must stay ahead of the cursor.
        if got < n then advance(e[1], score) end
      end
    end
    if #entries < want then break end
  end
  if got < n and examined >= BUDGET then out[5] = 1 end
  if head_moved then refresh_oldest(Q, name) end
  drop_stream_if_empty(Q, name)
end

if cur_sid then out[6] = string.format('%.17g', cur_score) .. ' ' .. cur_sid end
out[4] = got
if got > 0 then
  redis.call('HSET', Q.cfg, 'ld', int(now))
  count(Q, 'dlv', got)
  flight_add(Q, hidden_until, got, now)
  if vt_ms > 0 then wake(Q.waiters, name, 0, hidden_until, now) end
  -- Fewer than asked and nothing left behind: the caller may wait at once (as receive.lua).
  if got < n and out[5] == 0 then mark_waiting(Q.waiters, channel, tonumber(ARGV[7]) or 0, now) end
elseif out[5] == 1 then
  out[3] = now
else
  local r = redis.call('ZRANGEBYSCORE', Q.inflight, '(' .. int(now), '+inf',
    'WITHSCORES', 'LIMIT', 0, 1)
  if #r > 0 then out[3] = tonumber(r[2]) end
  local marker_ms = tonumber(ARGV[7]) or 0
  mark_waiting(Q.waiters, channel, marker_ms, now)
end
if handed then out[#out + 1] = handed end
return out
