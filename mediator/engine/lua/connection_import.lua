-- connection_import: record a connection carried over from another mediator (`mediator
-- import`), with our key on it (sealed) and, when it was granted mediation, its queue, in
-- one step: a connection is imported whole or not at all.
-- KEYS: the queue's keys (keys.QueueKeys.all); its config hash is the connection's record
-- ARGV[1] the qualified queue name  ARGV[2] the sealed key's field  ARGV[3] the sealed key
-- ARGV[4] the handshake state field (mediator/mediation/record.py)
-- ARGV[5] '1': make its queue (mediation granted), '': no queue
-- ARGV[6] when its queue was made (ms: the grant's time)
-- ARGV[7] n, the count of the queue's config field/value pairs that follow (2n values)
-- then the record's field/value pairs
-- Returns (replies.connection_imported; codes replies.ConnectionImportCode):
--   IMPORTED = 1  recorded
--   ALREADY = 0   an import recorded it before, with the same key (nothing changed)
--   TAKEN = -1    a connection with this peer key exists already, made here or imported
--                 with another key (nothing changed)
local Q = queue_keys(KEYS, 1)
local record = KEYS[1]
local had = redis.call('HGET', record, ARGV[2])
if had then
  if had == ARGV[3] then return 0 end
  return -1
end
if redis.call('HEXISTS', record, ARGV[4]) == 1 then return -1 end
local n = tonumber(ARGV[7])
if ARGV[5] == '1' and not exists(Q) then
  local config = {}
  for i = 8, 7 + 2 * n do config[#config + 1] = ARGV[i] end
  create_queue(Q, ARGV[1], tonumber(ARGV[6]), config)
end
-- In pieces: unpack takes some thousands of values at most (a keylist may be longer).
local fields = {ARGV[2], ARGV[3]}
for i = 8 + 2 * n, #ARGV do
  fields[#fields + 1] = ARGV[i]
  if #fields >= 1000 then
    redis.call('HSET', record, unpack(fields))
    fields = {}
  end
end
if #fields > 0 then redis.call('HSET', record, unpack(fields)) end
return 1
