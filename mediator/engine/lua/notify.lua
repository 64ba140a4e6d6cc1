-- notify: a connection's pending phone notification, the member '@note:<connection>' of its
-- shard's schedule, beside its record (the queue's config hash, in the same slot).
-- Record fields: dv service (fcm/apns), dt device token, dp platform, da app, nl when last
-- notified (ms), na failed attempts in a row, nq a message came since the last claim.
-- KEYS[1] the record  KEYS[2] the shard's schedule
-- ARGV[1] op  ARGV[2] member  ARGV[3] milliseconds from now
-- queued: a message was queued. With a device token: mark it new and, unless the member is
--   scheduled already (a burst, an interval or a backoff running), schedule it ARGV[3] from
--   now. Returns the time it was scheduled at; 0 without a device; -1 already scheduled.
-- claim: if the member is due, move it ARGV[3] ahead (a guard: should the claimer die, the
--   notification runs again then), clear nq and return {now, dv, dt, dp, da, nl, na, nq};
--   {} when it is not due (another worker ran it) or gone.
-- later: due ARGV[3] from now, marked new (an interval was not over yet).
-- retry: one more failed attempt (na); due ARGV[3] from now.
-- sent: note the time (nl), clear the attempts; then as `done`.
-- giveup: clear the attempts; then as `done`.
-- done: remove the member, unless a message came meanwhile (nq): then due ARGV[3] from now.
-- forget: the token is gone: remove the device fields and the member.
local record, due, op, member = KEYS[1], KEYS[2], ARGV[1], ARGV[2]
local now = now_ms()
local at = now + tonumber(ARGV[3])
if op == 'queued' then
  if redis.call('HEXISTS', record, 'dt') == 0 then return 0 end
  redis.call('HSET', record, 'nq', '1')
  if redis.call('ZADD', due, 'NX', int(at), member) == 0 then return -1 end
  return at
end
if op == 'claim' then
  local score = redis.call('ZSCORE', due, member)
  if not score or tonumber(score) > now then return {} end
  redis.call('ZADD', due, int(at), member)
  local f = redis.call('HMGET', record, 'dv', 'dt', 'dp', 'da', 'nl', 'na', 'nq')
  redis.call('HDEL', record, 'nq')
  return {int(now), f[1] or '', f[2] or '', f[3] or '', f[4] or '', f[5] or '0', f[6] or '0',
          f[7] or '0'}
end
if op == 'later' then
  redis.call('HSET', record, 'nq', '1')
  redis.call('ZADD', due, int(at), member)
  return at
end
if op == 'retry' then
  redis.call('HINCRBY', record, 'na', 1)
  redis.call('ZADD', due, int(at), member)
  return at
end
if op == 'forget' then
  redis.call('HDEL', record, 'dv', 'dt', 'dp', 'da', 'na', 'nq')
  redis.call('ZREM', due, member)
  return 0
end
if op == 'sent' then
  redis.call('HSET', record, 'nl', int(now))
end
if op == 'sent' or op == 'giveup' then
  redis.call('HDEL', record, 'na')
end
-- sent, giveup, done
if redis.call('HEXISTS', record, 'nq') == 1 then
  redis.call('ZADD', due, int(at), member)
  return at
end
redis.call('ZREM', due, member)
return 0
