"""Per-thread sender orders (RFC 0008), kept per connection in Redis with a sliding expiry.

For each thread we remember the highest `sender_order` the peer used and how many messages
we have sent on it, so a reply carries our own `sender_order` and, as an implicit
acknowledgement, `received_orders: {peer: n}`.
"""

from __future__ import annotations

from typing import Any

from redis.asyncio import Redis

from mediator.didcomm.message import Message
from mediator.engine import keys


class ThreadBook:
    def __init__(self, redis: Redis, ttl_seconds: int) -> None:
        self.redis = redis
        self.ttl = ttl_seconds

    async def reply_thread(self, connection: str, inbound: Message) -> dict[str, Any]:
        """The `~thread` of our next message on the inbound message's thread."""
        thread = inbound.thread
        key = keys.connection_keys(connection).threads
        pipe = self.redis.pipeline(transaction=False)
        pipe.hget(key, f"r:{thread.thid}")
        pipe.hset(key, f"r:{thread.thid}", thread.sender_order)
        pipe.hincrby(key, f"s:{thread.thid}", 1)
        pipe.expire(key, self.ttl)
        seen, _, sent, _ = await pipe.execute()
        # Messages may arrive out of order: keep reporting the highest order seen.
        highest = thread.sender_order
        if seen is not None and int(seen) > highest:
            highest = int(seen)
            await self.redis.hset(key, f"r:{thread.thid}", highest)
        out: dict[str, Any] = {
            "thid": thread.thid,
            "sender_order": int(sent) - 1,
            "received_orders": {connection: highest},
        }
        if thread.pthid is not None:
            out["pthid"] = thread.pthid
        return out
