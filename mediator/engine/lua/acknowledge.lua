-- acknowledge: delete messages by id in this queue only (a recipient acknowledging what it
-- received: messages-received), and return the queue's counts afterwards, for the status the
-- recipient is answered with; optionally also the RFC 0008 orders of that answer (the
-- connection's thread hash sits beside its queue), so the answer costs one call.
-- Ids not in this queue are skipped.
-- KEYS: the queue's keys (keys.QueueKeys.all); KEYS[15] (optional) the thread hash
-- ARGV[1] qualified queue name  ARGV[2] number of ids (k)  ARGV[3 .. 2+k] message ids
-- ARGV[3+k .. 5+k] with KEYS[15]: thread id, the peer's sender_order, ttl ms
-- Returns (replies.AcknowledgeReply; codes replies.Found, in queue_stats' place):
--   {deleted, our sender_order or -1, highest peer order or -1,
--    <queue_stats.lua's reply (12 values, from OK = 1)>..., the schedule's hint for the
--    workers or -1 (senders' byte counts: _lib.lua)}
--   {0, -1, -1, NO_QUEUE = -1}  no such queue
local Q = queue_keys(KEYS, 1)
if not exists(Q) then return {0, -1, -1, -1} end
local now = now_ms()
local k = tonumber(ARGV[2])
local deleted = 0
for i = 3, 2 + k do
  if delete_by_id(Q, ARGV[i], now) == 1 then deleted = deleted + 1 end
end
if deleted > 0 then tidy_after_deletes(Q, ARGV[1]) end
local out = {deleted, -1, -1}
if KEYS[15] then
  local orders = thread_orders(KEYS[15], ARGV[3 + k], ARGV[4 + k], ARGV[5 + k])
  out[2], out[3] = orders[1], orders[2]
end
for _, v in ipairs(queue_counts(Q, ARGV[1], now)) do out[#out + 1] = v end
out[#out + 1] = senders_due
return out
