-- queue_create: create a queue's configuration; its stream is made lazily on first send.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2..] config field/value pairs
-- Returns a code (replies.queue_created; codes replies.QueueCreateCode):
--   CREATED = 1  created
--   EXISTS = 0   a queue of that name exists
local Q = queue_keys(KEYS, 1)
if exists(Q) then return 0 end
local pairs_ = {}
for i = 2, #ARGV do pairs_[#pairs_ + 1] = ARGV[i] end
create_queue(Q, ARGV[1], now_ms(), pairs_)
return 1
