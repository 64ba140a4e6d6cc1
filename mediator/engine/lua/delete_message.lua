-- delete_message: remove one message by id, wherever it is in the queue.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] message id
-- Returns (replies.DeleteReply; codes replies.DeleteCode):
--   DELETED = 1   {1, hint}  hint: the schedule's hint for the workers, or -1 (_lib.lua's
--                 senders' byte counts)
--   NOT_HERE = 0  {0}        not in this queue
--   MOVED = 2     {2, dlq}   it was on its way to dead letter queue `dlq` (see delete_by_id);
--                 the caller deletes it there too
local Q = queue_keys(KEYS, 1)
local done, dlq = delete_by_id(Q, ARGV[2], now_ms())
if done == 1 then tidy_after_deletes(Q, ARGV[1]) end
if dlq then return {2, dlq} end
if done == 1 then return {1, senders_due} end
return {done}
