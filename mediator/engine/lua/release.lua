-- release: make handed-out messages visible again at once (a socket that carried them
-- closed before they were acknowledged). Their in-flight score goes back to just below their
-- stream id's time, as a parked entry's (see visible_score), so they come back in enqueue
-- order and a filtered receive with a cut-off still finds them. Unknown, delayed or already
-- visible ids are skipped; receive counts are left as they are.
-- KEYS[1] inflight  KEYS[2] ids  KEYS[3] waiters
-- ARGV[1] qualified queue name  ARGV[2..] message ids
-- Returns the number released.
local inflight, ids, waiters = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local released = 0
for i = 2, #ARGV do
  local sid = redis.call('HGET', ids, ARGV[i])
  if sid and string.find(sid, '-', 1, true) then
    local score = redis.call('ZSCORE', inflight, sid)
    if score and tonumber(score) > now then
      local _, arg = visible_score(sid, now)
      redis.call('ZADD', inflight, arg, sid)
      released = released + 1
    end
  end
end
if released > 0 then wake(waiters, ARGV[1], released, -1, now) end
return released
