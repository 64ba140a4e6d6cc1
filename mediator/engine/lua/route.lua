-- route: a recipient key routes to one connection: a field of a routes bucket, held by the
-- first connection that registered the key.
-- KEYS[1] the routes bucket (hash: raw recipient key -> connection)
-- ARGV[1] 'add' or 'release'  ARGV[2] the field (raw recipient key)  ARGV[3] the connection
-- Returns, add (replies.route_added; codes replies.RouteAddCode):
--   ADDED = 1         the key routes to the connection now
--   ALREADY_OURS = 0  it did already
--   TAKEN = -1        another connection holds it (nothing changed)
-- Returns, release (replies.held; codes replies.HeldCode), compare-and-delete:
--   HELD = 1          it was the connection's: released
--   NOT_HELD = 0      it was not (nothing changed)
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
