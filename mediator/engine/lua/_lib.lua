-- Helpers prepended to every script by mediator/engine/scripts.py. Keys always come from KEYS;
-- nothing here builds a key name.
--
-- Stream entry fields: i = message id, t = content type, e = content encoding, r = trace id,
-- z = first enqueue time (ms, kept across dead-lettering), b = body.
-- Config hash fields: ret, vt, dly (seconds), mr (max receives), dlq (qualified name),
-- lim_n, lim_b, lim_mb (count, size and message size limits), wq ('0' = refuse sends),
-- bytes (current body bytes), sched (registered upkeep time, ms), created (ms),
-- la, ld, lr (ms a message was last added, delivered, removed by id; absent when never).

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function to_table(arr)
  local t = {}
  for i = 1, #arr, 2 do t[arr[i]] = arr[i + 1] end
  return t
end

-- Changes the queue's byte count. Skips 0: Lua would send -0, which Redis 7.0 refuses.
local function add_bytes(cfg, delta)
  if delta ~= 0 then redis.call('HINCRBY', cfg, 'bytes', string.format('%d', delta)) end
end

local function ensure_stream(stream)
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XGROUP', 'CREATE', stream, 'g', '0', 'MKSTREAM')
  end
end

-- m = {id, ct, ce, tr, t0, body}
local function stream_add(stream, m)
  ensure_stream(stream)
  return redis.call('XADD', stream, '*', 'i', m[1], 't', m[2], 'e', m[3], 'r', m[4],
    'z', m[5], 'b', m[6])
end

local function drop_stream_if_empty(stream, inflight, rc)
  if redis.call('XLEN', stream) == 0 then
    redis.call('DEL', stream, inflight, rc)
  end
end

-- Wake-ups go only to the nodes waiting on the queue: `waiters` is a hash of node channel ->
-- Redis time (ms) until which that node waits on the queue (a long poll, or a live socket's
-- delivery loop, whose receive found nothing). Each such node gets
-- "wake <queue> <count visible now> <due ms or -1> <now ms>"; lapsed entries are dropped.
local function wake(waiters, name, count, due, now)
  local w = redis.call('HGETALL', waiters)
  if #w == 0 then return end
  local text = 'wake ' .. name .. ' ' .. string.format('%d', count) .. ' '
    .. string.format('%d', due) .. ' ' .. string.format('%d', now)
  for i = 1, #w, 2 do
    if tonumber(w[i + 1]) > now then
      redis.call('PUBLISH', w[i], text)
    else
      redis.call('HDEL', waiters, w[i])
    end
  end
end

-- Record that the node listening on `channel` waits on the queue for `ms` more; the key
-- lives as long as its longest entry.
local function mark_waiting(waiters, channel, ms, now)
  if ms <= 0 or channel == '' then return end
  redis.call('HSET', waiters, channel, string.format('%d', now + ms))
  if redis.call('PTTL', waiters) < ms then redis.call('PEXPIRE', waiters, ms) end
end

-- Lower the queue's registered upkeep time to `due`; returns due when it changed, else -1.
local function reschedule(cfg, due)
  local cur = redis.call('HGET', cfg, 'sched')
  if (not cur) or due < tonumber(cur) then
    redis.call('HSET', cfg, 'sched', string.format('%d', due))
    return due
  end
  return -1
end

local function first_score(zset)
  local r = redis.call('ZRANGE', zset, 0, 0, 'WITHSCORES')
  if #r == 0 then return nil end
  return tonumber(r[2])
end

-- Move due delayed messages into the stream (dropping those past retention).
-- Returns promoted, purged.
local function promote(cfg, stream, delayed, dbody, ids, now, ret_ms, limit)
  local due = redis.call('ZRANGEBYSCORE', delayed, '-inf', now, 'LIMIT', 0, limit)
  local promoted, purged = 0, 0
  for _, id in ipairs(due) do
    local packed = redis.call('HGET', dbody, id)
    redis.call('ZREM', delayed, id)
    redis.call('HDEL', dbody, id)
    if packed then
      local m = cmsgpack.unpack(packed)
      if now - tonumber(m[5]) >= ret_ms then
        redis.call('HDEL', ids, id)
        add_bytes(cfg, -#m[6])
        purged = purged + 1
      else
        local sid = stream_add(stream, m)
        redis.call('HSET', ids, id, sid)
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

-- Remove one stream entry for good: acknowledged first, so nothing is left in the PEL.
local function purge_entry(cfg, stream, inflight, rc, ids, sid, msg_id, size)
  redis.call('XACK', stream, 'g', sid)
  redis.call('XDEL', stream, sid)
  redis.call('ZREM', inflight, sid)
  redis.call('HDEL', rc, sid)
  redis.call('HDEL', ids, msg_id)
  add_bytes(cfg, -size)
end
