-- give_back: make a hand-off its socket did not write visible again at once (hand_off in
-- _lib.lua; the socket closed, left live mode, or was taken over), but only while it is
-- still that hand-off: in flight until the same deadline. A newer socket's reclaim, or a
-- re-offer, gave it another deadline, and it is theirs then.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] message id  ARGV[3] the hand-off's deadline (ms)
-- Returns 1 when released, else 0.
local Q = queue_keys(KEYS, 1)
local now = now_ms()
local sid = redis.call('HGET', Q.ids, ARGV[2])
if not sid or not string.find(sid, '-', 1, true) then return 0 end
local score = redis.call('ZSCORE', Q.inflight, sid)
if not score or tonumber(score) ~= tonumber(ARGV[3]) or tonumber(score) <= now then return 0 end
make_visible(Q, sid, score, now)
wake(Q.waiters, ARGV[1], 1, -1, now)
return 1
