-- route: a recipient key routes to one connection: a field of a routes bucket, held by the
-- first connection that registered the key.
-- KEYS[1] the routes bucket (hash: raw recipient key -> connection)
-- ARGV[1] 'add' or 'release'  ARGV[2] the field (raw recipient key)  ARGV[3] the connection
-- add: 1 added, 0 already this connection's, -1 another connection holds it
-- release: 1 released, 0 it was not this connection's (compare-and-delete)
local bucket, field, me = KEYS[1], ARGV[2], ARGV[3]
local holder = redis.call('HGET', bucket, field)
if ARGV[1] == 'add' then
  if not holder then
    redis.call('HSET', bucket, field, me)
    return 1
  end
  if holder == me then return 0 end
  return -1
end
if holder ~= me then return 0 end
redis.call('HDEL', bucket, field)
return 1
