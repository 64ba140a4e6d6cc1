-- send: store messages in a queue, visible now or after the queue's delay.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] qualified queue name  ARGV[2] the namespace's default settings (msgpack map, or '')
-- ARGV[3] the most messages the queue takes per second (0: no limit)
-- ARGV[4] '1': create a missing queue (lazy creation), with ARGV[5] = k config field/value
--         pairs in ARGV[6 .. 5+2k]; '0': refuse a missing queue (ARGV[5] = 0)
-- then 7 values per message: id, content type, content encoding, trace id, body, digest
--   (a digest other than '' skips the message when one with that digest is queued already),
--   sender tag (other than '': the sender's queued bytes are counted, _lib.lua)
-- Returns (replies.SendReply; codes replies.SendCode):
--   STORED = 1              {1, now, hint, visible, delayed, copy...}  hint: the shard's new
--                           earliest due time, or -1; a copy per message: '' when stored,
--                           else the queued message it duplicates
--   NO_QUEUE = -1           {-1}
--   MESSAGE_TOO_LARGE = -2  {-2, i, size}  message i (1-based) is over the message size limit
--   COUNT_LIMIT = -3        {-3, count}    the count limit would be passed (count = current)
--   SIZE_LIMIT = -4         {-4, bytes}    the size limit would be passed (bytes = current)
--   REFUSED = -5            {-5}           the queue refuses messages (will_queue false)
--   RATE_LIMITED = -6       {-6, ms}       over the per-second limit: the second ends in `ms`
local Q = queue_keys(KEYS, 1)
local k = tonumber(ARGV[5])
local lazy = false
if ARGV[4] == '1' then
  lazy = {}
  for i = 6, 5 + 2 * k do lazy[#lazy + 1] = ARGV[i] end
end
return send_messages(Q, ARGV[1], defaults_of(ARGV[2]), lazy, ARGV, 6 + 2 * k, tonumber(ARGV[3]))
