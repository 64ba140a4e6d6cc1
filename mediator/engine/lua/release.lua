-- release: make handed-out messages visible again at once (a socket that carried them
-- closed before they were acknowledged). Their in-flight score goes back to just below their
-- stream id's time, as a parked entry's (see visible_score), so they come back in enqueue
-- order and a filtered receive with a cut-off still finds them. Unknown, delayed or already
-- visible ids are skipped; receive counts are left as they are.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2..] message ids
-- Returns the number released.
local Q = queue_keys(KEYS, 1)
local now = now_ms()
local released = 0
for i = 2, #ARGV do
  local sid = redis.call('HGET', Q.ids, ARGV[i])
  if sid and string.find(sid, '-', 1, true) then
    local score = redis.call('ZSCORE', Q.inflight, sid)
    if score and tonumber(score) > now then
      make_visible(Q, sid, score, now)
      released = released + 1
    end
  end
end
if released > 0 then wake(Q.waiters, ARGV[1], released, -1, now) end
return released
