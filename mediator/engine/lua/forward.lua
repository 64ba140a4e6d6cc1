-- forward: store a message in the DIDComm queue a route names, in one call (a forward's
-- route lookup and send). Only where every key lives on one server (standalone, Sentinel):
-- the queue's keys are filled in here from TEMPLATES (keys.queue_key_templates, written
-- into this script when it is loaded: see scripts.py) once the route named the queue; on
-- Redis Cluster the caller reads the route, then sends.
-- KEYS[1] the routes bucket (hash: raw recipient key -> connection)
-- ARGV[1] the field (raw recipient key)  ARGV[2] the namespace's default settings (msgpack)
-- ARGV[3] space-separated: the most messages the queue takes per second (0: no limit),
--   milliseconds until a phone's notification (0: none), then config fields whose presence
--   the reply reports (a connection's push services, its device token)
-- ARGV[4 .. 10] one message: id, content type, content encoding, trace id, body, digest ('':
--   none; else a copy already queued with the same digest is not stored again), sender tag
-- Returns (replies.ForwardReply; codes replies.ForwardCode, then send.lua's):
--   NO_ROUTE = 0  {0}
--   ROUTED = 1    {1, name, bits, <send.lua's reply>...}: bit i of `bits` says the field
--                 i + 1 is present, the bit after them that a notification was scheduled (its
--                 time is then in the send reply's hint when earlier, so one ZADD LT serves
--                 both)
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
local per_second, notify_ms = nil, nil
local fields = {}
for f in string.gmatch(ARGV[3], '%S+') do
  if not per_second then
    per_second = tonumber(f)
  elseif not notify_ms then
    notify_ms = tonumber(f)
  else
    fields[#fields + 1] = f
  end
end
local r = send_messages(Q, qualified, defaults_of(ARGV[2]), {}, ARGV, 4, per_second)
local present, bit = 0, 1
for _, f in ipairs(fields) do
  if redis.call('HEXISTS', Q.cfg, f) == 1 then present = present + bit end
  bit = bit * 2
end
if r[1] == 1 and notify_ms > 0 and r[4] + r[5] > 0 then
  local at = note_queued(Q.cfg, Q.due, NOTE_MEMBER .. name, r[2] + notify_ms)
  if at > 0 then
    present = present + bit
    if r[3] < 0 or at < r[3] then r[3] = at end
  end
end
local out = {1, name, present}
for _, v in ipairs(r) do out[#out + 1] = v end
return out
