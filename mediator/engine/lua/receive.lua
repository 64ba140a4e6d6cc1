-- receive: hand out up to n visible messages, each hidden until its visibility deadline.
-- Due delayed messages are promoted first; messages whose visibility deadline passed come
-- before new ones. Expired messages (retention) are purged instead of returned. On the
-- receive that reaches max receives, the message is returned AND moved to the outbox of
-- its dead letter queue, from where the caller hands it over (dead_letter_accept/settle).
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] this node's wake channel  ARGV[3] n
-- ARGV[4] visibility timeout in ms for this call, or '' for the queue's own
-- ARGV[5] ms this node waits on the queue when nothing is found ('0': it will not wait).
--         Set in the same script that found the queue empty, so no later send misses it.
-- ARGV[6] ms after which the workers hand over a dead-lettered message left in the outbox
-- ARGV[7] the namespace's default settings (msgpack map, or '')
-- KEYS[15], ARGV[8], ARGV[9] (optional): a live socket's hold on its recipient, the socket
--         (`<node>/<socket>`) and the hold's new lifetime in ms: renewed here, or {-2}
-- Returns (replies.Handout.decode; codes replies.ReceiveCode):
--   OK = 1          {1, now, next_due, count, more, hint, <9 values per message>...}
--   NO_QUEUE = -1   {-1}
--   HOLD_LOST = -2  {-2}  another socket holds the recipient now: nothing was handed out
--   more: 1 when the script stopped at its budget of purged entries: call again at once;
--   with fewer than n handed out and more 0, the queue had nothing else visible, and the
--   node was marked as waiting (ARGV[5]) in this very call
--   hint: the shard's new earliest due time when dead-lettering or the senders' byte counts
--   (_lib.lua) made it so, else -1
--   per message: id, body, content type, content encoding, trace id, first enqueue ms,
--   receive count, visible-again ms, dead letter queue ('' unless dead-lettered now)
--   next_due: when nothing was returned, the earliest delayed/in-flight deadline (or -1)
local Q = queue_keys(KEYS, 1)
local name, channel, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
if not exists(Q) then return {-1} end
if not renew_hold(KEYS[15], ARGV[8], ARGV[9]) then return {-2} end
local c = settings(Q, defaults_of(ARGV[7]), {'vt', 'ret', 'mr', 'dlq'})
local now = now_ms()
local vt_ms = c.vt
if ARGV[4] ~= '' then vt_ms = tonumber(ARGV[4]) end
local ret_ms = c.ret
local max_receives = tonumber(c.mr)
local dlq = c.dlq

local promoted = promote(Q, now, ret_ms, 100)
local head_moved = promoted > 0

local out = {1, now, -1, 0, 0, -1}
local got = 0
local hidden_until = now + vt_ms
local examined = 0
local BUDGET = 1000  -- entries looked at per call, purged ones included
local outbox_grace = tonumber(ARGV[6]) or 5000

local function deliver(sid, fields)
  examined = examined + 1
  local f = to_table(fields)
  local size = #f.b
  if now - tonumber(f.z) >= ret_ms then
    purge_entry(Q, sid, f, 'exp', now)
    head_moved = true
    return
  end
  local receives = redis.call('HINCRBY', Q.rc, sid, 1)
  local moved_to = ''
  if max_receives and dlq and receives >= max_receives then
    redis.call('XACK', Q.stream, 'g', sid)
    redis.call('XDEL', Q.stream, sid)
    redis.call('ZREM', Q.inflight, sid)
    redis.call('HDEL', Q.rc, sid)
    add_bytes(Q, -size)
    tally_sender(Q, f.s, -size, now)
    count(Q, 'n', -1)
    count(Q, 'dl', 1)
    head_moved = true
    redis.call('HSET', Q.outbox, f.i,
      cmsgpack.pack({f.i, f.t, f.e, f.r, tonumber(f.z), f.b, hidden_until, dlq, now}))
    redis.call('HSET', Q.ids, f.i, 'o')
    out[6] = math.max(out[6], schedule(Q, name, now + outbox_grace))
    moved_to = dlq
  else
    redis.call('ZADD', Q.inflight, hidden_until, sid)
  end
  got = got + 1
  put_message(out, got, f, receives, hidden_until, moved_to)
end

if redis.call('EXISTS', Q.stream) == 1 then
  local expired = redis.call('ZRANGEBYSCORE', Q.inflight, '-inf', now, 'LIMIT', 0, n)
  if #expired > 0 then
    local claimed = redis.call('XCLAIM', Q.stream, 'g', 'c', 0, unpack(expired))
    local seen = {}
    for _, e in ipairs(claimed) do
      if e and e[2] then
        seen[e[1]] = true
        deliver(e[1], e[2])
      end
    end
    for _, sid in ipairs(expired) do
      if not seen[sid] then
        redis.call('ZREM', Q.inflight, sid)
        redis.call('HDEL', Q.rc, sid)
      end
    end
  end
  while got < n do
    if examined >= BUDGET then
      out[5] = 1
      break
    end
    local want = n - got
    local r = redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', want, 'STREAMS', Q.stream, '>')
    if not r then break end
    local entries = r[1][2]
    for _, e in ipairs(entries) do deliver(e[1], e[2]) end
    if #entries < want then break end
  end
  if head_moved then refresh_oldest(Q, name) end
  drop_stream_if_empty(Q, name)
end

out[4] = got
if got > 0 then
  redis.call('HSET', Q.cfg, 'ld', int(now))
  count(Q, 'dlv', got)
  local hidden = 0
  for i = 1, got do
    if out[6 + 9 * (i - 1) + 9] == '' then hidden = hidden + 1 end
  end
  flight_add(Q, hidden_until, hidden, now)
end
if got == 0 and out[5] == 1 then
  out[3] = now
elseif got == 0 then
  local d = first_score(Q.delayed)
  local i = first_score(Q.inflight)
  if d and (not i or d < i) then out[3] = d elseif i then out[3] = i end
  local marker_ms = tonumber(ARGV[5]) or 0
  mark_waiting(Q.waiters, channel, marker_ms, now)
else
  if vt_ms > 0 then wake(Q.waiters, name, 0, hidden_until, now) end
  if promoted > got then wake(Q.waiters, name, promoted - got, -1, now) end
  -- Fewer than asked and nothing left behind: the caller may wait at once, no empty receive
  -- needed first (marked after the wake-ups above, which are for the other waiters).
  if got < n and out[5] == 0 then mark_waiting(Q.waiters, channel, tonumber(ARGV[5]) or 0, now) end
end
out[6] = earlier(out[6], senders_due)
return out
