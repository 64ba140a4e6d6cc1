-- forward: store a message in the DIDComm queue a route names, in one call (a forward's
-- route lookup and send). Only where every key lives on one server (standalone, Sentinel):
-- the queue's keys are filled in here from TEMPLATES (keys.queue_key_templates, written
-- into this script when it is loaded: see scripts.py) once the route named the queue; on
-- Redis Cluster the caller reads the route, then sends.
-- KEYS[1] the routes bucket (hash: raw recipient key -> connection)
-- ARGV[1] the field (raw recipient key)  ARGV[2] the namespace's default settings (msgpack)
-- ARGV[3] config fields whose presence the reply reports, space-separated (a connection's push
--   services, its phone's device token): bit i of the reply's third value is field i + 1
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
local present, bit = 0, 1
for f in string.gmatch(ARGV[3], '%S+') do
  if redis.call('HEXISTS', Q.cfg, f) == 1 then present = present + bit end
  bit = bit * 2
end
local out = {1, name, present}
for _, v in ipairs(r) do out[#out + 1] = v end
return out
