-- thread_order: RFC 0008 orders for our next message on a thread of one connection.
-- Records the highest sender_order the peer used on the thread, counts ours, and keeps the
-- connection's thread hash for ARGV[3] more seconds.
-- KEYS[1] the connection's thread hash
-- ARGV[1] thread id  ARGV[2] the peer's sender_order on this message  ARGV[3] ttl seconds
-- Returns {our sender_order for the reply (0 for the first), highest peer order seen}
local threads = KEYS[1]
local seen_field, sent_field = 'r:' .. ARGV[1], 's:' .. ARGV[1]
local theirs = tonumber(ARGV[2])
local seen = tonumber(redis.call('HGET', threads, seen_field))
if not seen or theirs > seen then
  redis.call('HSET', threads, seen_field, theirs)
  seen = theirs
end
local ours = redis.call('HINCRBY', threads, sent_field, 1) - 1
redis.call('EXPIRE', threads, tonumber(ARGV[3]))
return {ours, seen}
