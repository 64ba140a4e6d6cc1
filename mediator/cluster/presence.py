"""The presence registry: which socket on which node holds each recipient's live delivery.

A hold is `<node>/<socket>` beside the connection's queue (keys.ConnectionKeys.presence).
Nothing renews holds one by one on a timer:

- **One node lease covers all of a node's sockets.** Every third of
  `MEDIATOR_PRESENCE_SECONDS` the node renews its entry in `keys.nodes()`, one command
  whatever the number of sockets; a hold counts only while its node's lease runs, so a dead
  node's recipients are free within that time.
- **A hold's own entry is renewed by the receives of its socket's delivery loop**, in the
  same script call (Engine.receive's `hold`), which an idle socket makes every
  `MEDIATOR_LIVE_RECHECK_SECONDS` anyway: the entry lives three times that, and is garbage
  collected by its expiry once its socket is gone.

So 20,000 idle live sockets cost Redis one script call per socket per recheck (every five
minutes by default: 67 a second) and one command per node every few seconds, not one
command per socket per heartbeat.

A second socket for the same recipient, on any node, claims the entry and so takes over:
the node of the previous holder hears `takeover` on its own channel and stops that
socket's live delivery, and the new socket hands out again what the old one had been given
and not acknowledged. A takeover message lost (pub/sub drops messages while a subscriber
reconnects) is caught by the old socket's next receive, which finds the hold gone, and by
the check of every hold this node has when its subscription comes back. A socket gives the
entry up by compare-and-delete, so it never removes a successor's claim.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from mediator import tasks
from mediator.engine import keys
from mediator.engine.model import Hold
from mediator.engine.replies import hold_previous
from mediator.engine.scripts import Scripts
from mediator.storage.clients import STORAGE_ERRORS, RedisClient

log = logging.getLogger(__name__)

TakeoverHandler = Callable[[str], Coroutine[Any, Any, None]]  # gets the connection taken over
LIVE_NODES_SECONDS = 1.0  # how long the set of live nodes is cached for `holder`


class Presence:
    def __init__(
        self,
        redis: RedisClient,
        node_id: str,
        ttl_seconds: float,
        entry_ttl_seconds: float,
    ) -> None:
        self.redis = redis
        self.scripts = Scripts(redis)
        self.node_id = node_id
        self.ttl_ms = int(ttl_seconds * 1000)  # the node lease
        self.entry_ttl_ms = int(entry_ttl_seconds * 1000)  # each hold's own entry
        self._sockets: dict[str, TakeoverHandler] = {}
        self._held: dict[str, str] = {}  # connection -> socket holding it here
        self._tasks: set[asyncio.Task[None]] = set()
        self._lease: asyncio.Task[None] | None = None
        self._live_nodes: tuple[float, dict[str, float]] = (0.0, {})

    def owner(self, socket_id: str) -> str:
        return Hold.owner_of(self.node_id, socket_id)

    def hold(self, connection: str, socket_id: str) -> Hold:
        """What a socket's delivery loop renews with each receive."""
        return Hold(
            keys.connection_keys(connection).presence, self.owner(socket_id), self.entry_ttl_ms
        )

    def register(self, socket_id: str, on_takeover: TakeoverHandler) -> None:
        self._sockets[socket_id] = on_takeover

    def unregister(self, socket_id: str) -> None:
        self._sockets.pop(socket_id, None)

    # ------------------------------------------------------------ the node lease

    async def start(self) -> None:
        await self._renew_lease()
        self._lease = asyncio.create_task(self._keep_lease(), name="node-lease")

    async def stop(self) -> None:
        if self._lease is not None:
            await tasks.stop(self._lease)
        with contextlib.suppress(*STORAGE_ERRORS):
            await self.redis.zrem(keys.nodes(), self.node_id)

    async def _keep_lease(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_ms / 3000)
            try:
                await self._renew_lease()
            except STORAGE_ERRORS as exc:
                log.warning("node lease renewal failed: %s", exc)

    async def _renew_lease(self) -> None:
        seconds, micros = await self.redis.time()
        now = int(seconds) * 1000 + int(micros) // 1000
        pipe = self.redis.pipeline(transaction=False)
        pipe.zadd(keys.nodes(), {self.node_id: now + self.ttl_ms})
        pipe.zremrangebyscore(keys.nodes(), "-inf", now - 60_000)  # long-gone nodes
        await pipe.execute()

    async def node_alive(self, node: str) -> bool:
        """Whether `node`'s lease runs (the live set is cached for a second)."""
        fetched, nodes = self._live_nodes
        if time.monotonic() - fetched > LIVE_NODES_SECONDS:
            seconds, micros = await self.redis.time()
            now = int(seconds) * 1000 + int(micros) // 1000
            rows = await self.redis.zrangebyscore(keys.nodes(), now, "+inf")
            nodes = {(n.decode() if isinstance(n, bytes) else str(n)): 0.0 for n in rows}
            self._live_nodes = (time.monotonic(), nodes)
        return node in nodes

    # ------------------------------------------------------------ holds

    async def claim(self, connection: str, socket_id: str) -> None:
        """Hold `connection`'s live delivery on this socket, taking it from any other."""
        previous = hold_previous(
            await self.scripts.call(
                "hold",
                [keys.connection_keys(connection).presence],
                ["claim", self.owner(socket_id), self.entry_ttl_ms],
            )
        )
        self._held[connection] = socket_id
        took_from = Hold.parse_owner(previous) if previous is not None else None
        if took_from is None:
            return
        node, old_socket = took_from
        if node == self.node_id:
            if old_socket != socket_id:
                self._take_over(connection, old_socket)
        else:
            await self.redis.publish(keys.node_channel(node), f"takeover {connection} {old_socket}")

    async def release(self, connection: str, socket_id: str) -> None:
        if self._held.get(connection) == socket_id:
            del self._held[connection]
        await self.scripts.call(
            "hold",
            [keys.connection_keys(connection).presence],
            ["release", self.owner(socket_id), 0],
        )

    async def holder(self, connection: str) -> str | None:
        """`<node>/<socket>` holding the connection's live delivery, if its node is alive."""
        value = await self.redis.get(keys.connection_keys(connection).presence)
        if value is None:
            return None
        text = value.decode() if isinstance(value, bytes) else str(value)
        return text if await self.node_alive(Hold.node_of(text)) else None

    # ------------------------------------------------------------ the node channel

    def on_takeover(self, text: str) -> None:
        """`<connection> <socket>` on this node's channel: that socket lost its hold."""
        parts = text.split()
        if len(parts) == 2:
            self._take_over(parts[0], parts[1])

    def reset(self) -> None:
        """The subscription came back: takeover messages may have been missed meanwhile,
        so every hold of this node is checked at once."""
        if self._held:
            self._spawn(self._check_holds(), "presence-check")

    async def _check_holds(self) -> None:
        held = list(self._held.items())
        try:
            pipe = self.redis.pipeline(transaction=False)
            for connection, _ in held:
                pipe.get(keys.connection_keys(connection).presence)
            owners = await pipe.execute()
        except STORAGE_ERRORS as exc:
            log.warning("checking this node's holds failed: %s", exc)
            return
        for (connection, socket_id), owner in zip(held, owners, strict=True):
            mine = self.owner(socket_id).encode()
            if owner != mine and self._held.get(connection) == socket_id:
                self._take_over(connection, socket_id)

    def _take_over(self, connection: str, socket_id: str) -> None:
        if self._held.get(connection) == socket_id:
            del self._held[connection]
        handler = self._sockets.get(socket_id)
        if handler is not None:
            self._spawn(handler(connection), "takeover")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.create_task(work, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
