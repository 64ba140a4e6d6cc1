"""The presence registry: which socket on which node holds each recipient's live delivery.

An entry is `<node>/<socket>` under the connection's hash tag, with a short TTL that the
socket's heartbeat extends. A second socket for the same recipient, on any node, claims the
entry and so takes over: the node of the previous holder hears `takeover` on its own channel
and stops that socket's live delivery, and the new socket hands out again what the old one
had been given and not acknowledged. A socket gives the entry up by compare-and-delete, so
it never removes a successor's claim. When a holder dies, its entry runs out.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from mediator.engine import keys
from mediator.engine.scripts import Scripts
from mediator.storage.clients import RedisClient

log = logging.getLogger(__name__)

TakeoverHandler = Callable[[str], Coroutine[Any, Any, None]]  # gets the connection taken over


class Presence:
    def __init__(self, redis: RedisClient, node_id: str, ttl_seconds: float) -> None:
        self.redis = redis
        self.scripts = Scripts(redis)
        self.node_id = node_id
        self.ttl_ms = int(ttl_seconds * 1000)
        self._sockets: dict[str, TakeoverHandler] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def owner(self, socket_id: str) -> str:
        return f"{self.node_id}/{socket_id}"

    def register(self, socket_id: str, on_takeover: TakeoverHandler) -> None:
        self._sockets[socket_id] = on_takeover

    def unregister(self, socket_id: str) -> None:
        self._sockets.pop(socket_id, None)

    async def claim(self, connection: str, socket_id: str) -> None:
        """Hold `connection`'s live delivery on this socket, taking it from any other."""
        previous = await self.scripts.call(
            "hold",
            [keys.connection_keys(connection).presence],
            ["claim", self.owner(socket_id), self.ttl_ms],
        )
        previous = previous.decode() if isinstance(previous, bytes) else str(previous)
        if not previous or "/" not in previous:
            return
        node, old_socket = previous.split("/", 1)
        if node == self.node_id:
            self._take_over(connection, old_socket)
        else:
            await self.redis.publish(keys.node_channel(node), f"takeover {connection} {old_socket}")

    async def refresh(self, connection: str, socket_id: str) -> bool:
        """Extend the hold; False when another socket has taken over."""
        held = await self.scripts.call(
            "hold",
            [keys.connection_keys(connection).presence],
            ["refresh", self.owner(socket_id), self.ttl_ms],
        )
        return bool(int(held))

    async def release(self, connection: str, socket_id: str) -> None:
        await self.scripts.call(
            "hold",
            [keys.connection_keys(connection).presence],
            ["release", self.owner(socket_id), 0],
        )

    async def holder(self, connection: str) -> str | None:
        value = await self.redis.get(keys.connection_keys(connection).presence)
        return None if value is None else value.decode() if isinstance(value, bytes) else value

    # ------------------------------------------------------------ the node channel

    def on_takeover(self, text: str) -> None:
        """`<connection> <socket>` on this node's channel: that socket lost its hold."""
        parts = text.split()
        if len(parts) == 2:
            self._take_over(parts[0], parts[1])

    def reset(self) -> None:
        """Messages may have been missed while resubscribing: each socket's next heartbeat
        finds out whether it still holds its recipients."""

    def _take_over(self, connection: str, socket_id: str) -> None:
        handler = self._sockets.get(socket_id)
        if handler is None:
            return
        task = asyncio.create_task(handler(connection), name="takeover")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
