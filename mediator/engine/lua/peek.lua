-- peek: the oldest stored messages, visible or handed out, changing nothing (read only; an
-- operator's view). Messages past retention that upkeep has not purged yet are left out;
-- delayed messages are not stored yet and are not shown.
-- KEYS: the queue's keys (keys.QueueKeys.all)
-- ARGV[1] n (most messages to return)  ARGV[2] the namespace's default settings (or '')
-- Returns (replies.Handout.decode; codes replies.ReceiveCode):
--   OK = 1         {1, now, -1, count, more, -1, <9 values per message as receive.lua>...}
--   NO_QUEUE = -1  {-1}
--   per message the visible-again ms is its in-flight score (a deadline still to come while
--   handed out), or its first enqueue ms when it was never handed out
--   more: 1 when the script stopped at its budget of expired entries skipped
local Q = queue_keys(KEYS, 1)
local stream, inflight, rc = Q.stream, Q.inflight, Q.rc
if not exists(Q) then return {-1} end
local ret_ms = settings(Q, defaults_of(ARGV[2]), {'ret'}).ret
local n = tonumber(ARGV[1])
local now = now_ms()
local out = {1, now, -1, 0, 0, -1}
local got, examined = 0, 0
local BUDGET = 1000
local start = '-'
while got < n do
  if examined >= BUDGET then
    out[5] = 1
    break
  end
  local want = math.min(100, BUDGET - examined)
  local entries = redis.call('XRANGE', stream, start, '+', 'COUNT', want)
  for _, e in ipairs(entries) do
    examined = examined + 1
    local f = to_table(e[2])
    if now - tonumber(f.z) < ret_ms then
      local score = redis.call('ZSCORE', inflight, e[1])
      got = got + 1
      put_message(out, got, f, tonumber(redis.call('HGET', rc, e[1]) or 0),
        tonumber(score or f.z), '')
      if got >= n then break end
    end
  end
  if #entries < want then break end
  start = '(' .. entries[#entries][1]
end
out[4] = got
return out
