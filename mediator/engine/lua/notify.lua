-- notify: a connection's pending phone notification, the member '@note:<connection>' of its
-- shard's schedule, beside its record (the queue's config hash, in the same slot).
-- Record fields: dv service (fcm/apns), dt a phone is registered (its token is KEYS[3]), dp
-- platform, da app, nl when last
-- notified (ms), na failed attempts in a row, nq a message came since the last claim, nc a
-- claim not settled yet, ni the notification's id (kept across its retries).
-- KEYS[1] the record  KEYS[2] the shard's schedule  KEYS[3] the device token (a string)
-- ARGV[1] op  ARGV[2] member  ARGV[3] milliseconds from now  ARGV[4] op's value (below)
-- queued: a message was queued (_lib.lua's note_queued, which forward.lua runs itself):
--   with a device token, mark it new and, unless the member is scheduled already, schedule
--   it ARGV[3] from now.
-- claim: if the member is due, move it ARGV[3] ahead (a guard: should the claimer die, the
--   notification runs again then); `new` is 1 when a message came since the last claim, or
--   when that claim was never settled (its claimer died: nc still set). A record that is
--   gone takes its member with it.
-- defer: a worker that cannot run it now (busy, or without the providers' settings) moves a
--   due member ARGV[3] ahead, so that it does not stay at the head of the schedule, read
--   again every tick, and hold up the upkeep due after it. Claims nothing, settles nothing.
-- Every other op settles the claim (clears nc); a record that is gone only drops the member.
-- later: due ARGV[3] from now, marked new (an interval was not over yet).
-- retry: one more failed attempt (na), the id ARGV[4] kept; due ARGV[3] from now.
-- forget: the provider says token ARGV[4] is gone: remove the device if it is still that
--   token (not one the wallet registered meanwhile), and the member.
-- sent: note the time (nl); then as giveup.
-- giveup, done: clear the attempts and the id; remove the member, unless a message came
--   meanwhile (nq): then due ARGV[3] from now.
-- Returns, claim (replies.NoteClaim): {now, dv, token, dp, da, nl, na, new, ni}, or {} when
--   it is not due (another worker ran it) or the record is gone.
-- Returns, every other op (replies.NoteReply; codes replies.NoteCode): the time (ms, above
--   0) the notification is due at when the op scheduled it, for the workers' hint; else
--   NOT_SCHEDULED = 0       queued: no device; the others: settled, forgotten, deferred,
--                           or the record is gone
--   ALREADY_SCHEDULED = -1  queued: it was scheduled already (a burst collapses into one)
local record, due, device, op, member = KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2]
local now = now_ms()
local at = now + tonumber(ARGV[3])
if op == 'queued' then
  return note_queued(record, due, member, at)
end
if redis.call('EXISTS', record) == 0 then
  redis.call('ZREM', due, member)
  redis.call('DEL', device)
  if op == 'claim' then return {} end
  return 0
end
if op == 'defer' then
  local score = redis.call('ZSCORE', due, member)
  if score and tonumber(score) <= now then redis.call('ZADD', due, 'XX', int(at), member) end
  return 0
end
if op == 'claim' then
  local score = redis.call('ZSCORE', due, member)
  if not score or tonumber(score) > now then return {} end
  redis.call('ZADD', due, int(at), member)
  local f = redis.call('HMGET', record, 'dv', 'dt', 'dp', 'da', 'nl', 'na', 'nq', 'nc', 'ni')
  local token = f[2] and redis.call('GET', device) or false
  local new = (f[7] or f[8]) and '1' or '0'
  redis.call('HDEL', record, 'nq')
  redis.call('HSET', record, 'nc', '1')
  return {int(now), f[1] or '', token or '', f[3] or '', f[4] or '', f[5] or '0', f[6] or '0',
          new, f[9] or ''}
end
redis.call('HDEL', record, 'nc')
if op == 'later' then
  redis.call('HSET', record, 'nq', '1')
  redis.call('ZADD', due, int(at), member)
  return at
end
if op == 'retry' then
  redis.call('HINCRBY', record, 'na', 1)
  redis.call('HSET', record, 'ni', ARGV[4])
  redis.call('ZADD', due, int(at), member)
  return at
end
if op == 'forget' then
  if redis.call('GET', device) == ARGV[4] then
    redis.call('DEL', device)
    redis.call('HDEL', record, 'dv', 'dt', 'dp', 'da', 'na', 'nq', 'ni')
    redis.call('ZREM', due, member)
    return 0
  end
  op = 'done'  -- the wallet registered another token meanwhile: it stays
end
if op == 'sent' then
  redis.call('HSET', record, 'nl', int(now))
end
-- sent, giveup, done
redis.call('HDEL', record, 'na', 'ni')
if redis.call('HEXISTS', record, 'nq') == 1 then
  redis.call('ZADD', due, int(at), member)
  return at
end
redis.call('ZREM', due, member)
return 0
