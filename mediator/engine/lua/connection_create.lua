-- connection_create: record a connection a handshake made, unless its key already has one.
-- KEYS[1] the connection's record hash
-- ARGV[1] now (ms)  ARGV[2] seconds to keep it unless mediation is granted
-- ARGV[3] the handshake state field  ARGV[4] the handshake time field
-- ARGV[5] the mediation state field (mediator/mediation/record.py)
-- ARGV[6..] field, value pairs to set
-- Returns (replies.connection_created; codes replies.ConnectionCreateCode):
--   CREATED = 1    recorded
--   KEY_TAKEN = 0  the key already belongs to a connection (nothing changed)
local record = KEYS[1]
if redis.call('HEXISTS', record, ARGV[3]) == 1 then return 0 end
redis.call('HSET', record, ARGV[4], ARGV[1], unpack(ARGV, 6))
if redis.call('HEXISTS', record, ARGV[5]) == 0 then
  redis.call('EXPIRE', record, tonumber(ARGV[2]))
end
return 1
