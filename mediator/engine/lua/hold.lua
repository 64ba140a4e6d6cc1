-- hold: a string key held by one owner: who holds a recipient's live socket ("<node>/<socket>"
-- with a short TTL), and whose a route is (release only: compare-and-delete).
-- KEYS[1] the key
-- ARGV[1] 'claim', 'refresh' or 'release'  ARGV[2] owner  ARGV[3] ttl (ms)
-- claim: take it (a second socket takes over). Returns (replies.hold_previous) the previous
--   owner, or '' if none.
-- refresh: extend it if still ours; release: delete it if still ours (compare-and-delete).
--   Returns (replies.held; codes replies.HeldCode):
--   HELD = 1      it was ours: extended, or deleted
--   NOT_HELD = 0  another owner took it over, or it is gone (nothing changed)
local key, op, me = KEYS[1], ARGV[1], ARGV[2]
local holder = redis.call('GET', key)
if op == 'claim' then
  redis.call('SET', key, me, 'PX', tonumber(ARGV[3]))
  if holder and holder ~= me then return holder end
  return ''
end
if holder ~= me then return 0 end
if op == 'refresh' then
  redis.call('PEXPIRE', key, tonumber(ARGV[3]))
else
  redis.call('DEL', key)
end
return 1
