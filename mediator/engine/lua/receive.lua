-- receive: hand out up to n visible messages, each hidden until its visibility deadline.
-- Due delayed messages are promoted first; messages whose visibility deadline passed come
-- before new ones. Expired messages (retention) are purged instead of returned. On the
-- receive that reaches max receives, the message is returned AND moved to the outbox of
-- its dead letter queue, from where the caller hands it over (dead_letter_accept/settle).
-- KEYS[1] cfg  KEYS[2] stream  KEYS[3] inflight  KEYS[4] receive counts  KEYS[5] delayed
-- KEYS[6] delayed bodies  KEYS[7] ids  KEYS[8] dead-letter outbox  KEYS[9] waiters
-- ARGV[1] qualified queue name  ARGV[2] this node's wake channel  ARGV[3] n
-- ARGV[4] visibility timeout in ms for this call, or '' for the queue's own
-- ARGV[5] ms this node waits on the queue when nothing is found ('0': it will not wait).
--         Set in the same script that found the queue empty, so no later send misses it.
-- ARGV[6] ms after which the workers hand over a dead-lettered message left in the outbox
-- Returns {1, now, next_due, count, more, sched, <9 values per message>...}
--   more: 1 when the script stopped at its budget of purged entries: call again at once
--   sched: the queue's new upkeep time when dead-lettering brought it forward, else -1
--   per message: id, body, content type, content encoding, trace id, first enqueue ms,
--   receive count, visible-again ms, dead letter queue ('' unless dead-lettered now)
--   next_due: when nothing was returned, the earliest delayed/in-flight deadline (or -1)
--         {-1}  no such queue
local cfg, stream, inflight, rc, delayed, dbody, ids, outbox, waiters =
  KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local name, channel, n = ARGV[1], ARGV[2], tonumber(ARGV[3])
local c = redis.call('HMGET', cfg, 'vt', 'ret', 'mr', 'dlq')
if not c[1] then return {-1} end
local now = now_ms()
local vt_ms = tonumber(c[1]) * 1000
if ARGV[4] ~= '' then vt_ms = tonumber(ARGV[4]) end
local ret_ms = tonumber(c[2]) * 1000
local max_receives = tonumber(c[3])
local dlq = c[4]

local promoted = promote(cfg, stream, delayed, dbody, ids, now, ret_ms, 100)

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
    purge_entry(cfg, stream, inflight, rc, ids, sid, f.i, size)
    return
  end
  local receives = redis.call('HINCRBY', rc, sid, 1)
  local moved_to = ''
  if max_receives and dlq and receives >= max_receives then
    redis.call('XACK', stream, 'g', sid)
    redis.call('XDEL', stream, sid)
    redis.call('ZREM', inflight, sid)
    redis.call('HDEL', rc, sid)
    add_bytes(cfg, -size)
    redis.call('HSET', outbox, f.i,
      cmsgpack.pack({f.i, f.t, f.e, f.r, tonumber(f.z), f.b, hidden_until, dlq, now}))
    redis.call('HSET', ids, f.i, 'o')
    out[6] = math.max(out[6], reschedule(cfg, now + outbox_grace))
    moved_to = dlq
  else
    redis.call('ZADD', inflight, hidden_until, sid)
  end
  got = got + 1
  put_message(out, got, f, receives, hidden_until, moved_to)
end

if redis.call('EXISTS', stream) == 1 then
  local expired = redis.call('ZRANGEBYSCORE', inflight, '-inf', now, 'LIMIT', 0, n)
  if #expired > 0 then
    local claimed = redis.call('XCLAIM', stream, 'g', 'c', 0, unpack(expired))
    local seen = {}
    for _, e in ipairs(claimed) do
      if e and e[2] then
        seen[e[1]] = true
        deliver(e[1], e[2])
      end
    end
    for _, sid in ipairs(expired) do
      if not seen[sid] then
        redis.call('ZREM', inflight, sid)
        redis.call('HDEL', rc, sid)
      end
    end
  end
  while got < n do
    if examined >= BUDGET then
      out[5] = 1
      break
    end
    local want = n - got
    local r = redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', want, 'STREAMS', stream, '>')
    if not r then break end
    local entries = r[1][2]
    for _, e in ipairs(entries) do deliver(e[1], e[2]) end
    if #entries < want then break end
  end
  drop_stream_if_empty(stream, inflight, rc)
end

out[4] = got
if got > 0 then redis.call('HSET', cfg, 'ld', string.format('%d', now)) end
if got == 0 and out[5] == 1 then
  out[3] = now
elseif got == 0 then
  local d = first_score(delayed)
  local i = first_score(inflight)
  if d and (not i or d < i) then out[3] = d elseif i then out[3] = i end
  local marker_ms = tonumber(ARGV[5]) or 0
  mark_waiting(waiters, channel, marker_ms, now)
else
  if vt_ms > 0 then wake(waiters, name, 0, hidden_until, now) end
  if promoted > got then wake(waiters, name, promoted - got, -1, now) end
end
return out
