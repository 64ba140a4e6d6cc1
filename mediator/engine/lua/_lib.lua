-- Helpers prepended to every script by mediator/engine/scripts.py. Keys come from KEYS (or,
-- in forward.lua alone, from templates the caller passes); nothing here makes up a key name.
--
-- Stream entry fields: i = message id, t = content type, e = content encoding, r = trace id,
-- z = first enqueue time (ms, kept across dead-lettering), b = body, s = the sender's tag
-- (only on a forwarded message: see "senders' queued bytes" below).
-- Config hash fields: ret, vt, dly (retention, visibility timeout, delay: whole seconds, or
-- ms in ret_ms, vt_ms, dly_ms when not a whole second; see `settings`), mr (max receives),
-- dlq (qualified name),
-- lim_n, lim_b, lim_mb (count, size and message size limits), wq ('0' = refuse sends),
-- bytes (current body bytes; absent = 0), created (ms: the queue exists while it is set),
-- la, ld, lr (ms a message was last added, delivered, removed by id; absent when never),
-- q:<sender tag> (bytes of the sender's messages in the queue; absent when none).
-- A namespace may keep its queues' settings out of the hash: its callers pass the defaults
-- (a msgpack map) and a setting the hash lacks is read from there.
--
-- Every script that changes a queue keeps its shard's books in the same call: the
-- namespace's totals (keys.shard_totals), in-flight buckets (shard_flight), oldest index
-- (shard_oldest), registry (shard_registry) and the shard's schedule (shard_due).

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function int(n)
  return string.format('%d', n)
end

local function to_table(arr)
  local t = {}
  for i = 1, #arr, 2 do t[arr[i]] = arr[i + 1] end
  return t
end

-- The standard keys of a per-queue script (keys.QueueKeys.all), from position `at` of `list`.
local function queue_keys(list, at)
  return {cfg = list[at], stream = list[at + 1], inflight = list[at + 2], rc = list[at + 3],
    delayed = list[at + 4], dbody = list[at + 5], ids = list[at + 6], outbox = list[at + 7],
    waiters = list[at + 8], due = list[at + 9], tot = list[at + 10], fl = list[at + 11],
    old = list[at + 12], reg = list[at + 13], dg = list[at] .. ':dg',
    -- x:{S}:due -> x:{S}:sb and x:{S}:sbd (keys.shard_senders, shard_senders_changed)
    sb = string.sub(list[at + 9], 1, -4) .. 'sb', sbd = string.sub(list[at + 9], 1, -4) .. 'sbd'}
end

local function exists(Q)
  return redis.call('HEXISTS', Q.cfg, 'created') == 1
end

-- The queue's name within its namespace ("didcomm:abc" -> "abc"): the registry and oldest
-- index are per namespace, the schedule is shared and takes the qualified name.
local function short_name(name)
  return string.sub(name, string.find(name, ':', 1, true) + 1)
end

local function defaults_of(packed)
  if packed == nil or packed == '' then return nil end
  return cmsgpack.unpack(packed)
end

-- Timers: stored as whole seconds (the format of every earlier version), or in ms under
-- `<name>_ms` when not a whole second (mediator/engine/model.py); read in ms.
local TIMERS = {ret = true, vt = true, dly = true}

local function setting(fields, n)
  if not fields then return nil end
  if not TIMERS[n] then return fields[n] end
  local ms = fields[n .. '_ms']
  if ms then return tonumber(ms) end
  local seconds = fields[n]
  if seconds then return tonumber(seconds) * 1000 end
  return nil
end

-- The named settings (timers in ms), from the hash or else from `defaults`; missing ones
-- are nil.
local function settings(Q, defaults, names)
  local fields = {}
  for _, n in ipairs(names) do
    fields[#fields + 1] = n
    if TIMERS[n] then fields[#fields + 1] = n .. '_ms' end
  end
  local got = redis.call('HMGET', Q.cfg, unpack(fields))
  local stored = {}
  for i, f in ipairs(fields) do
    if got[i] then stored[f] = got[i] end
  end
  local out = {}
  for _, n in ipairs(names) do
    local v = setting(stored, n)
    if v == nil then v = setting(defaults, n) end
    out[n] = v
  end
  return out
end

-- Store a timer of `ms` in the form `settings` reads, dropping its other form.
local function set_timer(Q, n, ms)
  ms = tonumber(ms)
  if ms % 1000 == 0 then
    redis.call('HSET', Q.cfg, n, int(ms / 1000))
    redis.call('HDEL', Q.cfg, n .. '_ms')
  else
    redis.call('HSET', Q.cfg, n .. '_ms', int(ms))
    redis.call('HDEL', Q.cfg, n)
  end
end

-- ------------------------------------------------------------------ the shard's books

local function count(Q, field, delta)
  if delta ~= 0 then redis.call('HINCRBY', Q.tot, field, int(delta)) end
end

-- Changes the queue's and the shard's byte counts (never by 0: Lua would send -0).
local function add_bytes(Q, delta)
  if delta ~= 0 then
    redis.call('HINCRBY', Q.cfg, 'bytes', int(delta))
    redis.call('HINCRBY', Q.tot, 'b', int(delta))
  end
end

-- In-flight buckets: the second a deadline ends in (rounded up) -> messages. A deadline is
-- counted when it is set in the future, and uncounted when its entry leaves it before it
-- ends; a past second is simply no longer summed (and pruned by shard_stats).
local function second(ms)
  return int(math.ceil(ms / 1000))
end

local function flight_add(Q, deadline, n, now)
  if n > 0 and deadline > now then redis.call('HINCRBY', Q.fl, second(deadline), n) end
end

local function flight_drop(Q, score, now)
  if not score then return end
  score = tonumber(score)
  if score > now then
    local s = second(score)
    if redis.call('HINCRBY', Q.fl, s, -1) <= 0 then redis.call('HDEL', Q.fl, s) end
  end
end

-- The oldest index holds the first enqueue time of the stream's head entry.
local function refresh_oldest(Q, name)
  local head = redis.call('XRANGE', Q.stream, '-', '+', 'COUNT', 1)
  if #head > 0 then
    redis.call('ZADD', Q.old, to_table(head[1][2]).z, short_name(name))
  else
    redis.call('ZREM', Q.old, short_name(name))
  end
end

-- Bring `member`'s time in the shard's schedule forward to `due` (ms). Returns `due` when
-- that made it the shard's earliest (the workers' hint must learn it), else -1.
local function schedule(Q, member, due)
  local head = redis.call('ZRANGE', Q.due, 0, 0, 'WITHSCORES')
  redis.call('ZADD', Q.due, 'LT', int(due), member)
  if #head == 0 or due < tonumber(head[2]) then return due end
  return -1
end

-- ------------------------------------------------------------------ senders' queued bytes

-- A forwarded message carries its sender's tag (a keyed hash of its connection or address:
-- mediator/mediation/senders.py), and what a sender has queued across the cluster is held to
-- --limit-sender-queued-bytes. A script that stores or removes a tagged message records the
-- change in its own slot: in the queue's tally (config field `q:<tag>`, what a queue deleted
-- whole gives back) and in the shard's totals (`Q.sb`: tag -> bytes it has queued in the
-- shard), marking the sender changed (`Q.sbd`). The worker holding the shard copies the
-- changed senders' totals into their counts, SETTLE_MS after the first change (member
-- SENDERS_MEMBER of the shard's schedule): copies, not increments, so a copy lost or made
-- twice does no harm. `senders_due` is the hint this call must give the workers when that
-- made it the shard's earliest (-1: none): the scripts that change tagged messages return
-- it (send, forward, acknowledge, receive, delete, queue_delete).
local SETTLE_MS = 1000
local senders_due = -1

local function earlier(a, b)
  if a < 0 then return b end
  if b < 0 then return a end
  return math.min(a, b)
end

local function owe_sender(Q, tag, delta, now)
  if not tag or tag == '' or delta == 0 then return end
  if redis.call('HINCRBY', Q.sb, tag, int(delta)) <= 0 then redis.call('HDEL', Q.sb, tag) end
  if redis.call('SADD', Q.sbd, tag) == 1 then
    senders_due = earlier(senders_due, schedule(Q, SENDERS_MEMBER, now + SETTLE_MS))
  end
end

local function tally_sender(Q, tag, delta, now)
  if not tag or tag == '' or delta == 0 then return end
  local field = 'q:' .. tag
  if redis.call('HINCRBY', Q.cfg, field, int(delta)) <= 0 then redis.call('HDEL', Q.cfg, field) end
  owe_sender(Q, tag, delta, now)
end

-- A queue's whole tally given back (the queue is deleted); its fields are removed.
local function give_back_tally(Q, now)
  local fields = redis.call('HKEYS', Q.cfg)
  for _, field in ipairs(fields) do
    if string.sub(field, 1, 2) == 'q:' then
      local held = tonumber(redis.call('HGET', Q.cfg, field)) or 0
      redis.call('HDEL', Q.cfg, field)
      owe_sender(Q, string.sub(field, 3), -held, now)
    end
  end
end

-- ------------------------------------------------------------------ streams

local function ensure_stream(stream)
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, 'g', '0', 'MKSTREAM')
  end
end

-- m = {id, ct, ce, tr, t0, body, sender tag or nil/''}
local function stream_add(stream, m)
  ensure_stream(stream)
  if m[7] and m[7] ~= '' then
    return redis.call('XADD', stream, '*', 'i', m[1], 't', m[2], 'e', m[3], 'r', m[4],
      'z', m[5], 'b', m[6], 's', m[7])
  end
  return redis.call('XADD', stream, '*', 'i', m[1], 't', m[2], 'e', m[3], 'r', m[4],
    'z', m[5], 'b', m[6])
end

local function drop_stream_if_empty(Q, name)
  if redis.call('XLEN', Q.stream) == 0 then
    redis.call('DEL', Q.stream, Q.inflight, Q.rc)
    redis.call('ZREM', Q.old, short_name(name))
    if redis.call('HLEN', Q.ids) == 0 then redis.call('DEL', Q.dg) end
  end
end

-- ------------------------------------------------------------------ duplicates

-- The envelope digests of a queue (`dg`, a hash: digest -> message id) say which message
-- already holds the same bytes: a sender that forwards one envelope once per recipient key
-- must not queue it twice for one connection. An entry counts while its message is still
-- in the queue (not acknowledged, expired or moved); the others are dropped when the hash
-- outgrows the queue, and the hash with the queue's last message.
local function queued_copy(Q, digest)
  local mid = redis.call('HGET', Q.dg, digest)
  if not mid then return nil end
  local loc = redis.call('HGET', Q.ids, mid)
  if loc and loc ~= 'x' then return mid end
  return nil
end

local function remember_digests(Q, pairs_)
  if #pairs_ == 0 then return end
  redis.call('HSET', Q.dg, unpack(pairs_))
  local size = redis.call('HLEN', Q.dg)
  if size > 64 and size > 2 * redis.call('HLEN', Q.ids) then
    local all = redis.call('HGETALL', Q.dg)
    for i = 1, #all, 2 do
      local loc = redis.call('HGET', Q.ids, all[i + 1])
      if not loc or loc == 'x' then redis.call('HDEL', Q.dg, all[i]) end
    end
  end
end

-- Wake-ups go only to the nodes waiting on the queue: `waiters` is a hash of node channel ->
-- Redis time (ms) until which that node waits on the queue (a long poll, or a live socket's
-- delivery loop, whose receive found nothing). Each such node gets
-- "wake <queue> <count visible now> <due ms or -1> <now ms>"; lapsed entries are dropped.
-- Fields starting with '@' are not channels: a live socket's hand-off marker and the
-- hand-offs' count (see hand_off). `skip`: a channel told otherwise (nil: none).
local function wake(waiters, name, count_, due, now, skip)
  local w = redis.call('HGETALL', waiters)
  if #w == 0 then return end
  local text = 'wake ' .. name .. ' ' .. int(count_) .. ' ' .. int(due) .. ' ' .. int(now)
  for i = 1, #w, 2 do
    local field = w[i]
    if string.byte(field) == 64 then  -- '@'
      if string.sub(field, 1, 3) == '@h ' and tonumber(w[i + 1]) <= now then
        redis.call('HDEL', waiters, field)
      end
    elseif tonumber(w[i + 1]) > now then
      if field ~= skip then redis.call('PUBLISH', field, text) end
    else
      redis.call('HDEL', waiters, field)
    end
  end
end

-- A live socket's delivery loop asks for hand-offs (receive_filtered.lua): its marker in
-- `waiters`, field "@h <owner> <channel> <deadline ms>" (the socket's hold owner, its node's
-- channel, the delivery deadline), valued as every entry there, the Redis time (ms) until
-- which it stands. One socket holds a recipient, so its marker replaces any other. "@n"
-- counts the hand-offs made while markers stood; the receive returns it, so that the
-- socket's node orders what was handed to it before the receive ahead of what it returned.
-- "@r" is the count at the last receive: at most HANDOFF_RUN hand-offs between two
-- receives, so a node holds little for a socket that does not keep up. Both counts are
-- stored plus COUNT_BASE: scripts of older versions read every field as a channel and its
-- value as the time it lapses, and so leave them alone.
local COUNT_BASE = 1000000000000000
local HANDOFF_RUN = 10  -- a live delivery's batch (transport/websocket.py LIVE_BATCH)

local function mark_live(waiters, owner, channel, vt, ms, now)
  local field = '@h ' .. owner .. ' ' .. channel .. ' ' .. int(vt)
  for _, f in ipairs(redis.call('HKEYS', waiters)) do
    if string.sub(f, 1, 3) == '@h ' and f ~= field then redis.call('HDEL', waiters, f) end
  end
  local n = tonumber(redis.call('HGET', waiters, '@n')) or COUNT_BASE
  redis.call('HSET', waiters, field, int(now + ms), '@n', int(n), '@r', int(n))
  if redis.call('PTTL', waiters) < ms then redis.call('PEXPIRE', waiters, ms) end
  return n - COUNT_BASE
end

-- Record that the node listening on `channel` waits on the queue for `ms` more; the key
-- lives as long as its longest entry.
local function mark_waiting(waiters, channel, ms, now)
  if ms <= 0 or channel == '' then return end
  redis.call('HSET', waiters, channel, int(now + ms))
  if redis.call('PTTL', waiters) < ms then redis.call('PEXPIRE', waiters, ms) end
end

-- A live socket's hold on its recipient (keys.ConnectionKeys.presence, "<node>/<socket>"):
-- renewed for `ttl` ms when it is still `owner`'s; false when another socket took it over.
-- No key: nothing is held (a plain receive).
local function renew_hold(key, owner, ttl)
  if not key then return true end
  if redis.call('GET', key) ~= owner then return false end
  redis.call('PEXPIRE', key, ttl)
  return true
end

local function first_score(zset)
  local r = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')
  if #r == 0 then return nil end
  return tonumber(r[2])
end

-- Move due delayed messages into the stream (dropping those past retention).
-- Returns promoted, purged.
local function promote(Q, now, ret_ms, limit)
  local due = redis.call('ZRANGEBYSCORE', Q.delayed, '-inf', now, 'LIMIT', 0, limit)
  local promoted, purged = 0, 0
  for _, id in ipairs(due) do
    local packed = redis.call('HGET', Q.dbody, id)
    redis.call('ZREM', Q.delayed, id)
    redis.call('HDEL', Q.dbody, id)
    count(Q, 'd', -1)
    if packed then
      local m = cmsgpack.unpack(packed)
      if now - tonumber(m[5]) >= ret_ms then
        redis.call('HDEL', Q.ids, id)
        add_bytes(Q, -#m[6])
        tally_sender(Q, m[7], -#m[6], now)
        count(Q, 'exp', 1)
        purged = purged + 1
      else
        local sid = stream_add(Q.stream, m)
        redis.call('HSET', Q.ids, id, sid)
        count(Q, 'n', 1)
        promoted = promoted + 1
      end
    end
  end
  return promoted, purged
end

-- The in-flight score of an entry that stays in the PEL while visible (parked by a filtered
-- receive, or released): just below its stream id's ms and rising with the id's sequence, so
-- such entries sort in stream (enqueue) order, exactly up to 4,096 ids in one ms, and never
-- after `now`. A stream id's ms is never more than 1 ms before the entry's first enqueue
-- time (both are taken as send starts), so the score is less than PARKED_SKEW_MS below it.
-- Also returned as the text for ZADD: Lua prints numbers with 14 digits, losing the fraction.
local PARKED_SKEW_MS = 1000
local function visible_score(sid, now)
  local ms, seq = string.match(sid, '^(%d+)-(%d+)$')
  local score = tonumber(ms) - 1 + math.min(tonumber(seq) + 1, 4096) / 4096
  if score > now then score = now end
  return score, string.format('%.17g', score)
end

-- Append one handed-out message to a receive reply: 9 values from position 6 + 9 * (got - 1).
local function put_message(out, got, f, receives, visible_at, moved_to)
  local base = 6 + 9 * (got - 1)
  out[base + 1] = f.i
  out[base + 2] = f.b
  out[base + 3] = f.t
  out[base + 4] = f.e
  out[base + 5] = f.r
  out[base + 6] = tonumber(f.z)
  out[base + 7] = receives
  out[base + 8] = visible_at
  out[base + 9] = moved_to
end

-- A handed-out message (in flight until `score`) visible again at once, in enqueue order
-- (its score just below its stream id's time, as a parked entry's: visible_score).
local function make_visible(Q, sid, score, now)
  flight_drop(Q, score, now)
  local _, arg = visible_score(sid, now)
  redis.call('ZADD', Q.inflight, arg, sid)
end

-- Larger messages are fetched by the socket's receive (a hand-off crosses the cluster bus
-- to every node of a Redis Cluster).
local HANDOFF_MAX_BYTES = 16384

-- A message just stored (stream entry `sid`) in a queue whose live socket asked for
-- hand-offs: when the socket still holds its recipient (keys.ConnectionKeys.presence, beside
-- the record) and the message is the only visible one (nothing unread before it, nothing
-- visible in flight), it is handed out here as receive_filtered.lua would (in flight until
-- the socket's deadline, counted as delivered) and published to the socket's node:
-- "take " .. msgpack {queue, owner, hand-off number, put_message's 9 values}. Returns the
-- channel it went to, or nil (the message is left to the wake-ups).
local function hand_off(Q, name, sid, size, now)
  if size > HANDOFF_MAX_BYTES then return nil end
  local w = redis.call('HGETALL', Q.waiters)
  local owner, channel, vt, n, r
  for i = 1, #w, 2 do
    local field = w[i]
    if string.sub(field, 1, 3) == '@h ' and tonumber(w[i + 1]) > now then
      owner, channel, vt = string.match(field, '^@h (%S+) (%S+) (%d+)$')
    elseif field == '@n' then
      n = tonumber(w[i + 1])
    elseif field == '@r' then
      r = tonumber(w[i + 1])
    end
  end
  if not owner or not n or not r or n - r >= HANDOFF_RUN then return nil end
  -- The hold: gone when its socket closed or left live mode, another's after a takeover.
  if redis.call('GET', Q.cfg .. ':p') ~= owner then return nil end
  local lag
  local group = redis.call('XINFO', 'GROUPS', Q.stream)[1]
  for i = 1, #group, 2 do
    if group[i] == 'lag' then lag = group[i + 1] end
  end
  if lag ~= 1 then return nil end  -- others unread, or unknown (Redis < 7, deleted entries)
  if #redis.call('ZRANGEBYSCORE', Q.inflight, '-inf', now, 'LIMIT', 0, 1) > 0 then
    return nil  -- a message is visible again: the socket's receive takes them in order
  end
  local read = redis.call('XREADGROUP', 'GROUP', 'g', 'c', 'COUNT', 1, 'STREAMS', Q.stream, '>')
  local e = read and read[1][2][1]
  if not e then return nil end
  if e[1] ~= sid then  -- not expected (lag was 1): left visible, as a receive parks
    redis.call('ZADD', Q.inflight, select(2, visible_score(e[1], now)), e[1])
    return nil
  end
  local f = to_table(e[2])
  local deadline = now + tonumber(vt)
  local receives = redis.call('HINCRBY', Q.rc, sid, 1)
  redis.call('ZADD', Q.inflight, deadline, sid)
  redis.call('HSET', Q.cfg, 'ld', int(now))
  count(Q, 'dlv', 1)
  flight_add(Q, deadline, 1, now)
  local number = redis.call('HINCRBY', Q.waiters, '@n', 1) - COUNT_BASE
  local out = {}
  put_message(out, 1, f, receives, deadline, '')
  redis.call('PUBLISH', channel, 'take ' .. cmsgpack.pack(
    {name, owner, number, out[7], out[8], out[9], out[10], out[11], out[12], out[13], out[14],
      out[15]}))
  return channel, deadline
end

-- Remove one stream entry for good (acknowledged first, so nothing is left in the PEL),
-- counted as `why`: 'exp' (retention) or 'ack' (deleted by id). `f`: its fields.
local function purge_entry(Q, sid, f, why, now)
  local msg_id, size = f.i, #f.b
  local score = redis.call('ZSCORE', Q.inflight, sid)
  -- A write that frees memory first: at maxmemory the server refuses a script whose first
  -- write may grow memory (HINCRBY), and an acknowledgement is what frees it.
  redis.call('XACK', Q.stream, 'g', sid)
  redis.call('XDEL', Q.stream, sid)
  flight_drop(Q, score, now)
  redis.call('ZREM', Q.inflight, sid)
  redis.call('HDEL', Q.rc, sid)
  redis.call('HDEL', Q.ids, msg_id)
  add_bytes(Q, -size)
  tally_sender(Q, f.s, -size, now)
  count(Q, 'n', -1)
  count(Q, why, 1)
end

-- What a queue leaves behind when its config went without queue_delete (a DIDComm
-- connection's record that expired unmediated, with a queue in it): its messages leave the
-- books as dropped (their sizes summed: the config's byte count went with it), its in-flight
-- deadlines and index entries go, its keys are deleted. At most `most` stream entries per
-- call; returns true when nothing is left.
local function reap(Q, name, now, most)
  local stored = redis.call('XLEN', Q.stream)
  if stored > most then  -- a part now, the rest in the next call
    for _, e in ipairs(redis.call('XRANGE', Q.stream, '-', '+', 'COUNT', most)) do
      local f = to_table(e[2])
      flight_drop(Q, redis.call('ZSCORE', Q.inflight, e[1]), now)
      redis.call('XACK', Q.stream, 'g', e[1])
      redis.call('XDEL', Q.stream, e[1])
      redis.call('ZREM', Q.inflight, e[1])
      redis.call('HDEL', Q.rc, e[1])
      redis.call('HDEL', Q.ids, f.i)
      count(Q, 'n', -1)
      count(Q, 'b', -#f.b)
      count(Q, 'drop', 1)
      owe_sender(Q, f.s, -#f.b, now)  -- the config (and its tally) is gone
    end
    return false
  end
  local size = 0
  for _, e in ipairs(redis.call('XRANGE', Q.stream, '-', '+')) do
    local f = to_table(e[2])
    size = size + #f.b
    owe_sender(Q, f.s, -#f.b, now)
  end
  local hidden = redis.call('ZRANGEBYSCORE', Q.inflight, '(' .. int(now), '+inf', 'WITHSCORES')
  for i = 2, #hidden, 2 do flight_drop(Q, hidden[i], now) end
  local delayed = redis.call('ZCARD', Q.delayed)
  for _, packed in ipairs(redis.call('HVALS', Q.dbody)) do
    local m = cmsgpack.unpack(packed)
    size = size + #m[6]
    owe_sender(Q, m[7], -#m[6], now)
  end
  count(Q, 'n', -stored)
  count(Q, 'd', -delayed)
  count(Q, 'b', -size)
  count(Q, 'drop', stored + delayed)
  redis.call('DEL', Q.stream, Q.inflight, Q.rc, Q.delayed, Q.dbody, Q.ids, Q.outbox, Q.waiters,
    Q.dg)
  if redis.call('SREM', Q.reg, short_name(name)) == 1 then count(Q, 'q', -1) end
  redis.call('ZREM', Q.old, short_name(name))
  redis.call('ZREM', Q.due, name)
  return true
end

-- Whether a queue without a config left keys behind (see reap).
local function has_leftovers(Q)
  return redis.call('EXISTS', Q.stream, Q.delayed, Q.ids, Q.outbox) > 0
end

-- A new queue: its config (field/value list), creation time, registry entry and count.
local function create_queue(Q, name, now, fields)
  if has_leftovers(Q) then
    while not reap(Q, name, now, 1000) do end
  end
  if #fields > 0 then redis.call('HSET', Q.cfg, unpack(fields)) end
  redis.call('HSET', Q.cfg, 'created', int(now))
  if redis.call('SADD', Q.reg, short_name(name)) == 1 then count(Q, 'q', 1) end
end

-- RFC 0008 orders for our next message on a thread of one connection: records the highest
-- sender_order the peer used on the thread, counts ours, and keeps the connection's thread
-- hash `ttl` ms more. Returns {our sender_order for the reply (0 first), highest seen}.
local function thread_orders(threads, thid, theirs, ttl)
  -- Two generations, so that threads no longer used are forgotten while the connection
  -- stays active (every request opens a thread): `threads` takes the writes and is renamed
  -- to `<threads>:o` (keys.py's threads_before: the previous generation, only read) once it
  -- is `ttl` old. A thread is kept from `ttl` to twice that after its last message; a field
  -- of the previous generation is carried into the current one when its thread is used
  -- again. The generation's birth is kept in ms in `@m` (in seconds in `@` by the versions
  -- before, still read).
  ttl = tonumber(ttl)
  local old = threads .. ':o'
  local now = now_ms()
  local born = tonumber(redis.call('HGET', threads, '@m'))
  if not born then
    born = tonumber(redis.call('HGET', threads, '@'))
    if born then born = born * 1000 end
  end
  if born and now - born >= ttl then
    redis.call('RENAME', threads, old)
    redis.call('PEXPIRE', old, ttl)
    born = nil
  end
  if not born then redis.call('HSET', threads, '@m', int(now)) end
  local seen_field, sent_field = 'r:' .. thid, 's:' .. thid
  theirs = tonumber(theirs)
  local seen = tonumber(redis.call('HGET', threads, seen_field))
  local sent = redis.call('HGET', threads, sent_field)
  if not seen and not sent then
    seen = tonumber(redis.call('HGET', old, seen_field))
    sent = redis.call('HGET', old, sent_field)
    if sent then redis.call('HSET', threads, sent_field, sent) end
  end
  if not seen or theirs > seen then seen = theirs end
  redis.call('HSET', threads, seen_field, seen)
  local ours = redis.call('HINCRBY', threads, sent_field, 1) - 1
  redis.call('PEXPIRE', threads, 2 * ttl)
  return {ours, seen}
end

-- A queue's counts at this instant (queue_stats.lua's reply): {1, now, stored, in flight,
-- delayed, oldest, bytes, next upkeep, last added, delivered, removed, newest}.
local function queue_counts(Q, name, now)
  local c = redis.call('HMGET', Q.cfg, 'bytes', 'la', 'ld', 'lr')
  local stored = redis.call('XLEN', Q.stream)
  local hidden = redis.call('ZCOUNT', Q.inflight, '(' .. int(now), '+inf')
  local nd = redis.call('ZCARD', Q.delayed)
  local oldest = -1
  local head = redis.call('XRANGE', Q.stream, '-', '+', 'COUNT', 1)
  if #head > 0 then oldest = tonumber(to_table(head[1][2]).z) end
  local first = redis.call('ZRANGE', Q.delayed, 0, 0)
  if #first > 0 then
    local packed = redis.call('HGET', Q.dbody, first[1])
    if packed then
      local t0 = tonumber(cmsgpack.unpack(packed)[5])
      if oldest < 0 or t0 < oldest then oldest = t0 end
    end
  end
  local newest = -1
  local tail = redis.call('XREVRANGE', Q.stream, '+', '-', 'COUNT', 1)
  if #tail > 0 then newest = tonumber(to_table(tail[1][2]).z) end
  local last = redis.call('ZRANGE', Q.delayed, -1, -1)
  if #last > 0 then
    local packed = redis.call('HGET', Q.dbody, last[1])
    if packed then
      local t1 = tonumber(cmsgpack.unpack(packed)[5])
      if t1 > newest then newest = t1 end
    end
  end
  local sched = redis.call('ZSCORE', Q.due, name)
  return {1, now, stored, hidden, nd, oldest, tonumber(c[1]) or 0, tonumber(sched) or -1,
    tonumber(c[2]) or -1, tonumber(c[3]) or -1, tonumber(c[4]) or -1, newest}
end

-- Remove one message by id, wherever it is in the queue. The oldest index and the empty
-- stream are left for the caller (`tidy_after_deletes`), which may delete several first.
-- Returns 1 deleted, 0 not in this queue, or 2 and the dead letter queue when it was on its
-- way there (its outbox entry becomes a tombstone `x:<ms>` and its id `x`, so that a
-- hand-over under way learns of the delete: dead_letter_settle).
local function delete_by_id(Q, id, now)
  local loc = redis.call('HGET', Q.ids, id)
  if not loc or loc == 'x' then return 0 end
  if loc == 'd' then
    local packed = redis.call('HGET', Q.dbody, id)
    redis.call('ZREM', Q.delayed, id)
    redis.call('HDEL', Q.dbody, id)
    redis.call('HDEL', Q.ids, id)
    if packed then
      local m = cmsgpack.unpack(packed)
      add_bytes(Q, -#m[6])
      tally_sender(Q, m[7], -#m[6], now)
      count(Q, 'd', -1)
      count(Q, 'ack', 1)
    end
    redis.call('HSET', Q.cfg, 'lr', int(now))
    return 1
  end
  if loc == 'o' then
    local packed = redis.call('HGET', Q.outbox, id)
    redis.call('HSET', Q.outbox, id, 'x:' .. int(now))
    redis.call('HSET', Q.ids, id, 'x')
    if packed then return 2, cmsgpack.unpack(packed)[8] end
    return 1
  end
  local entry = redis.call('XRANGE', Q.stream, loc, loc)
  if #entry == 0 then
    redis.call('HDEL', Q.ids, id)
    flight_drop(Q, redis.call('ZSCORE', Q.inflight, loc), now)
    redis.call('ZREM', Q.inflight, loc)
    redis.call('HDEL', Q.rc, loc)
    return 0
  end
  purge_entry(Q, loc, to_table(entry[1][2]), 'ack', now)
  redis.call('HSET', Q.cfg, 'lr', int(now))
  return 1
end

local function tidy_after_deletes(Q, name)
  refresh_oldest(Q, name)
  drop_stream_if_empty(Q, name)
end

-- A limit setting: a positive number, or nil for none ('0' stores "no limit" over a default).
local function limit(value)
  local n = tonumber(value)
  if n and n > 0 then return n end
  return nil
end

-- A sender's message was queued for a DIDComm connection: when its record names a phone
-- (`dt`: it has a device token), mark it new (`nq`) and schedule its notification (member `member`
-- of the shard's schedule) at `at`, unless one is scheduled already (a burst, an interval or
-- a backoff running; mediator/notify/notifier.py). Returns `at`; -1 when one was scheduled
-- already; 0 without a phone.
local function note_queued(record, due, member, at)
  if redis.call('HEXISTS', record, 'dt') == 0 then return 0 end
  redis.call('HSET', record, 'nq', '1')
  if redis.call('ZADD', due, 'NX', int(at), member) == 0 then return -1 end
  return at
end

-- ------------------------------------------------------------------ budgets

-- Take `amount` from a fixed window's budget kept in `key` (an abuse limit). Returns 0 when
-- taken, else the milliseconds until the window ends (nothing taken). An amount of 0 only
-- asks whether one more would be taken; the first request of a window is taken whatever its
-- amount, so something larger than a whole budget is not refused forever.
local function take_budget(key, amount, budget, window_ms)
  local used = tonumber(redis.call('GET', key) or '0')
  if used > 0 and used + math.max(amount, 1) > budget then
    local left = redis.call('PTTL', key)
    if left < 0 then
      redis.call('PEXPIRE', key, window_ms)
      left = window_ms
    end
    return left
  end
  if amount > 0 then
    redis.call('INCRBY', key, amount)
    if used == 0 then redis.call('PEXPIRE', key, window_ms) end
  end
  return 0
end

-- Store messages in a queue (send.lua and forward.lua). `lazy` = false: a missing queue is
-- refused; else the list of config pairs a missing queue is created with.
-- `args` from position `first`: 7 values per message (send.lua's). Returns the reply of
-- send.lua.
-- `per_second`: the most messages the queue takes in a second (forwards to one recipient:
-- --limit-forwards-per-second; 0: no limit), counted in `<cfg>:fr`.
local function send_messages(Q, name, defaults, lazy, args, first, per_second)
  local now = now_ms()
  if not exists(Q) then
    if not lazy then return {-1} end
    create_queue(Q, name, now, lazy)
  end
  local c = settings(Q, defaults, {'ret', 'dly', 'lim_n', 'lim_b', 'lim_mb', 'wq', 'bytes'})
  if c.wq == '0' then return {-5} end
  -- 7 values a message: id, content type, content encoding, trace id, body, digest ('':
  -- none), sender tag ('': not counted)
  local all = (#args - first + 1) / 7
  local copies, bases, digests = {}, {}, {}
  for i = 0, all - 1 do
    local base = first + 7 * i
    local digest = args[base + 5]
    local copy = digest ~= '' and (queued_copy(Q, digest) or digests[digest])
    if copy then
      copies[i + 1] = copy
    else
      copies[i + 1] = ''
      bases[#bases + 1] = base
      if digest ~= '' then digests[digest] = args[base] end
    end
  end
  local n = #bases
  local function reply(code, hint, visible, delayed)
    local out = {code, now, hint, visible, delayed}
    for i = 1, all do out[5 + i] = copies[i] end
    return out
  end
  if n == 0 then return reply(1, -1, 0, 0) end
  if per_second and per_second > 0 then
    local wait = take_budget(Q.cfg .. ':fr', n, per_second, 1000)
    if wait > 0 then return {-6, wait} end
  end
  local total = 0
  local lim_mb, lim_n, lim_b = limit(c.lim_mb), limit(c.lim_n), limit(c.lim_b)
  for i, base in ipairs(bases) do
    local size = #args[base + 4]
    if lim_mb and size > lim_mb then return {-2, (base - first) / 7 + 1, size} end
    total = total + size
  end
  if lim_n then
    local held = redis.call('XLEN', Q.stream) + redis.call('ZCARD', Q.delayed)
    if held + n > lim_n then return {-3, held} end
  end
  local bytes = tonumber(c.bytes) or 0
  if lim_b and bytes + total > lim_b then return {-4, bytes} end

  local delay_ms = c.dly or 0
  local due = now + delay_ms
  local was_empty = delay_ms == 0 and redis.call('XLEN', Q.stream) == 0
  local remembered = {}
  local last_sid
  for _, base in ipairs(bases) do
    local m = {args[base], args[base + 1], args[base + 2], args[base + 3], now, args[base + 4]}
    local tag = args[base + 6]
    if tag ~= '' then
      m[7] = tag
      tally_sender(Q, tag, #m[6], now)
    end
    if delay_ms > 0 then
      redis.call('ZADD', Q.delayed, due, m[1])
      redis.call('HSET', Q.dbody, m[1], cmsgpack.pack(m))
      redis.call('HSET', Q.ids, m[1], 'd')
    else
      last_sid = stream_add(Q.stream, m)
      redis.call('HSET', Q.ids, m[1], last_sid)
    end
    if args[base + 5] ~= '' then
      remembered[#remembered + 1] = args[base + 5]
      remembered[#remembered + 1] = m[1]
    end
  end
  remember_digests(Q, remembered)
  add_bytes(Q, total)
  count(Q, delay_ms > 0 and 'd' or 'n', n)
  count(Q, 'add', n)
  redis.call('HSET', Q.cfg, 'la', int(now))
  if was_empty then redis.call('ZADD', Q.old, now, short_name(name)) end

  local upkeep = now + c.ret
  if delay_ms > 0 and due < upkeep then upkeep = due end
  local hint = earlier(schedule(Q, name, upkeep), senders_due)
  if delay_ms > 0 then
    wake(Q.waiters, name, 0, due, now)
    return reply(1, hint, 0, n)
  end
  if n == 1 then  -- a live socket may take it at once (hand_off)
    local channel, deadline = hand_off(Q, name, last_sid, total, now)
    if channel then
      wake(Q.waiters, name, 0, deadline, now, channel)
      return reply(1, hint, n, 0)
    end
  end
  wake(Q.waiters, name, n, -1, now)
  return reply(1, hint, n, 0)
end
