"""Per-thread sender orders (RFC 0008), kept per connection in Redis with a sliding expiry.

For each thread we remember the highest `sender_order` the peer used and how many messages
we have sent on it, so a reply carries our own `sender_order` and, as an implicit
acknowledgement, `received_orders: {peer: n}`.
"""

from __future__ import annotations

from typing import Any

from mediator.didcomm.message import Message
from mediator.engine import keys
from mediator.engine.scripts import Scripts
from mediator.storage.clients import RedisClient


class ThreadBook:
    def __init__(self, redis: RedisClient, ttl_seconds: int) -> None:
        self.scripts = Scripts(redis)
        self.ttl = ttl_seconds

    async def reply_thread(self, connection: str, inbound: Message) -> dict[str, Any]:
        """The `~thread` of our next message on the inbound message's thread."""
        thread = inbound.thread
        ours, highest = await self.scripts.call(
            "thread_order",
            [keys.connection_keys(connection).threads],
            [thread.thid, thread.sender_order, self.ttl],
        )
        out: dict[str, Any] = {
            "thid": thread.thid,
            "sender_order": int(ours),
            "received_orders": {connection: int(highest)},
        }
        if thread.pthid is not None:
            out["pthid"] = thread.pthid
        return out
