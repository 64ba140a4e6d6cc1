-- forward: store a message in the DIDComm queue a route names, in one call (a forward's
-- route lookup and send). Only where every key lives on one server (standalone, Sentinel):
-- the queue's keys are filled in here from TEMPLATES (keys.queue_key_templates, written
-- into this script when it is loaded: see scripts.py) once the route named the queue; on
-- Redis Cluster the caller reads the route, then sends.
-- KEYS[1] the routes bucket (hash: raw recipient key -> connection)
-- ARGV[1] the field (raw recipient key)  ARGV[2] the namespace's default settings (msgpack)
-- ARGV[3] a config field whose presence the reply reports (a connection's push services)
-- ARGV[4 .. 8] one message: id, content type, content encoding, trace id, body
-- Returns {0}  no route; else {1, name, field present 0/1, <send.lua's reply>...}
local name = redis.call('HGET', KEYS[1], ARGV[1])
if not name then return {0} end
local qualified = NAMESPACE .. ':' .. name
local shard = int(tonumber(string.sub(redis.sha1hex(qualified), 1, 8), 16) % SHARDS)
local list = {}
for i, template in ipairs(TEMPLATES) do
  local key = string.gsub(template, '%$S', shard)
  list[i] = string.gsub(key, '%$N', function() return name end)
end
local Q = queue_keys(list, 1)
local r = send_messages(Q, qualified, defaults_of(ARGV[2]), {}, ARGV, 4)
local out = {1, name, redis.call('HEXISTS', Q.cfg, ARGV[3])}
for _, v in ipairs(r) do out[#out + 1] = v end
return out
