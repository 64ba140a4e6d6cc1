-- connection_create: record a connection a handshake made, unless its key already has one.
-- KEYS[1] the connection's record hash
-- ARGV[1] now (ms)  ARGV[2] seconds to keep it unless mediation is granted
-- ARGV[3..] field, value pairs to set
-- Returns 1 when created, 0 when the key already belongs to a connection (nothing changed).
local record = KEYS[1]
if redis.call('HEXISTS', record, 'hs') == 1 then return 0 end
redis.call('HSET', record, 'hs_ms', ARGV[1], unpack(ARGV, 3))
if redis.call('HEXISTS', record, 'state') == 0 then
  redis.call('EXPIRE', record, tonumber(ARGV[2]))
end
return 1
