-- thread_order: RFC 0008 orders for our next message on a thread of one connection (see
-- thread_orders in _lib.lua).
-- KEYS[1] the connection's thread hash
-- ARGV[1] thread id  ARGV[2] the peer's sender_order on this message  ARGV[3] ttl ms
-- Returns (replies.ThreadOrders): {our sender_order for the reply (0 for the first), the
--   highest the peer used}
return thread_orders(KEYS[1], ARGV[1], ARGV[2], ARGV[3])
