"""Per-thread sender orders (RFC 0008), kept per connection in Redis with a sliding expiry.

For each thread we remember the highest `sender_order` the peer used and how many messages
we have sent on it, so a reply carries our own `sender_order` and, as an implicit
acknowledgement, `received_orders: {peer: n}`. A script that handles the inbound message
on the connection's slot may count the reply in the same call (`ThreadOrder`, see
acknowledge.lua); otherwise `reply_thread` asks on its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis.exceptions import OutOfMemoryError

from mediator.didcomm.message import Message
from mediator.engine import keys
from mediator.engine.replies import ThreadOrders
from mediator.engine.scripts import Scripts
from mediator.storage.clients import RedisClient


@dataclass(frozen=True)
class ThreadOrder:
    """What counts our reply to one inbound message: the connection's thread hash and the
    script arguments (thread id, the peer's sender_order, the hash's lifetime in ms)."""

    key: str
    args: tuple[str, int, int]


class ThreadBook:
    def __init__(self, redis: RedisClient, ttl_seconds: int) -> None:
        self.scripts = Scripts(redis)
        self.ttl_ms = ttl_seconds * 1000

    def order(self, connection: str, inbound: Message) -> ThreadOrder:
        thread = inbound.thread
        return ThreadOrder(
            keys.connection_keys(connection).threads,
            (thread.thid, thread.sender_order, self.ttl_ms),
        )

    async def reply_thread(self, connection: str, inbound: Message) -> dict[str, Any]:
        """The `~thread` of our next message on the inbound message's thread."""
        order = self.order(connection, inbound)
        try:
            orders = ThreadOrders.decode(
                await self.scripts.call("thread_order", [order.key], list(order.args))
            )
        except OutOfMemoryError:  # Redis is full: a reply (a pickup's, which frees memory)
            # still goes out, with orders that are not remembered
            return self.thread(connection, inbound, 0, inbound.thread.sender_order)
        return self.thread(connection, inbound, orders.ours, orders.highest)

    @staticmethod
    def thread(connection: str, inbound: Message, ours: int, highest: int) -> dict[str, Any]:
        thread = inbound.thread
        out: dict[str, Any] = {
            "thid": thread.thid,
            "sender_order": ours,
            "received_orders": {connection: highest},
        }
        if thread.pthid is not None:
            out["pthid"] = thread.pthid
        return out
