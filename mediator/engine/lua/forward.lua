-- forward: store a message in the queue a route names, in one call (a forward's route
-- lookup and send). Only where every key lives on one server (standalone, Sentinel): the
-- queue's keys are filled in here from templates the caller builds (keys.queue_key_templates)
-- once the route named the queue; on Redis Cluster the caller reads the route, then sends.
-- KEYS[1] the routes bucket (hash: raw recipient key -> queue name)
-- ARGV[1] the field (raw recipient key)  ARGV[2] namespace  ARGV[3] shard count
-- ARGV[4] the namespace's default settings (msgpack map)
-- ARGV[5] a config field whose presence the reply reports (a connection's push services)
-- ARGV[6 .. 19] the 14 key templates of keys.QueueKeys.all, with $S (shard) and $N (name)
-- ARGV[20 .. 24] one message: id, content type, content encoding, trace id, body
-- Returns {0}  no route; else {1, name, field present 0/1, <send.lua's reply>...}
local name = redis.call('HGET', KEYS[1], ARGV[1])
if not name then return {0} end
local qualified = ARGV[2] .. ':' .. name
local shard = int(tonumber(string.sub(redis.sha1hex(qualified), 1, 8), 16) % tonumber(ARGV[3]))
local list = {}
for i = 6, 19 do
  local key = string.gsub(ARGV[i], '%$S', shard)
  list[#list + 1] = string.gsub(key, '%$N', function() return name end)
end
local Q = queue_keys(list, 1)
local r = send_messages(Q, qualified, defaults_of(ARGV[4]), {}, ARGV, 20)
local out = {1, name, redis.call('HEXISTS', Q.cfg, ARGV[5])}
for _, v in ipairs(r) do out[#out + 1] = v end
return out
