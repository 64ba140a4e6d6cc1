-- tag_stats: counts of the messages of one queue that carry a trace id (read only). It scans
-- the stream, so it is bounded by ARGV[2] entries (DIDComm queues have count limits).
-- KEYS[1] cfg  KEYS[2] stream  KEYS[3] inflight
-- ARGV[1] trace id  ARGV[2] most entries to scan
-- Returns {1, now, count, visible, bytes, oldest enqueue ms or -1, newest or -1, complete 0/1}
--         {-1}  no such queue
local cfg, stream, inflight = KEYS[1], KEYS[2], KEYS[3]
if redis.call('EXISTS', cfg) == 0 then return {-1} end
local now = now_ms()
local tag, most = ARGV[1], tonumber(ARGV[2])
local count, visible, bytes, oldest, newest = 0, 0, 0, -1, -1
local entries = redis.call('XRANGE', stream, '-', '+', 'COUNT', most)
for _, e in ipairs(entries) do
  local f = to_table(e[2])
  if f.r == tag then
    count = count + 1
    bytes = bytes + #f.b
    local z = tonumber(f.z)
    if oldest < 0 or z < oldest then oldest = z end
    if z > newest then newest = z end
    local score = redis.call('ZSCORE', inflight, e[1])
    if not score or tonumber(score) <= now then visible = visible + 1 end
  end
end
local complete = 1
if #entries >= most then complete = 0 end
return {1, now, count, visible, bytes, oldest, newest, complete}
