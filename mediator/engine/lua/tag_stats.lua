-- tag_stats: counts of the stored and delayed messages of one queue that carry a trace id
-- (read only). It reads every entry, so it looks at most at ARGV[2] of them (DIDComm queues
-- have count limits), 100 at a time; `complete` is 0 when it stopped there.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] trace id  ARGV[2] most entries to look at
-- Returns (replies.tag_stats; codes replies.Found):
--   OK = 1         {1, now, count, visible, bytes, oldest enqueue ms or -1, newest or -1,
--                  complete 0/1}
--   NO_QUEUE = -1  {-1}
local Q = queue_keys(KEYS, 1)
local stream, inflight, delayed, dbody = Q.stream, Q.inflight, Q.delayed, Q.dbody
if not exists(Q) then return {-1} end
local now = now_ms()
local tag, most = ARGV[1], tonumber(ARGV[2])
local count, visible, bytes, oldest, newest = 0, 0, 0, -1, -1
local seen = 0

local function tally(tr, z, size, is_visible)
  if tr ~= tag then return end
  count = count + 1
  bytes = bytes + size
  if oldest < 0 or z < oldest then oldest = z end
  if z > newest then newest = z end
  if is_visible then visible = visible + 1 end
end

local start = '-'
while seen < most do
  local want = math.min(100, most - seen)
  local entries = redis.call('XRANGE', stream, start, '+', 'COUNT', want)
  for _, e in ipairs(entries) do
    local f = to_table(e[2])
    local score = f.r == tag and redis.call('ZSCORE', inflight, e[1])
    tally(f.r, tonumber(f.z), #f.b, not score or tonumber(score) <= now)
  end
  seen = seen + #entries
  if #entries < want then break end
  start = '(' .. entries[#entries][1]
end
local ndelayed = redis.call('ZCARD', delayed)
if ndelayed > 0 and seen < most then
  for _, id in ipairs(redis.call('ZRANGE', delayed, 0, most - seen - 1)) do
    seen = seen + 1
    local packed = redis.call('HGET', dbody, id)
    if packed then
      local m = cmsgpack.unpack(packed)
      tally(m[4], tonumber(m[5]), #m[6], false)
    end
  end
end
local complete = 1
if seen >= most and seen < redis.call('XLEN', stream) + ndelayed then complete = 0 end
return {1, now, count, visible, bytes, oldest, newest, complete}
