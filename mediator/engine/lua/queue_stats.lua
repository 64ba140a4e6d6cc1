-- queue_stats: counts of one queue at this instant (read only).
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name
-- Returns (replies.queue_stats; codes replies.Found):
--   OK = 1         {1, now, stored, in flight (deadline not passed), delayed, oldest enqueue
--                  ms or -1, bytes, next upkeep or -1, last added, last delivered, last
--                  removed (ms or -1), newest enqueue ms or -1}
--   NO_QUEUE = -1  {-1}
--   oldest/newest come from the stream's head and tail and the delayed set's first and last:
--   exact for queues without delay or dead-letter input (DIDComm queues), else close to it
local Q = queue_keys(KEYS, 1)
if not exists(Q) then return {-1} end
return queue_counts(Q, ARGV[1], now_ms())
