"""Redis clients for each deployment mode, with explicit timeouts (redis-py's defaults break
blocking reads) and no automatic retries (a script retried after a timeout could store a
message twice: a failed call surfaces, mqs answers 503, and the caller decides). A connection
given up on is closed abortively (RST, its unsent bytes dropped), so a command answered 503
after a timeout does not reach the server later, when a network partition heals.

- standalone: one server;
- Sentinel: the primary the sentinels name, asked again on every new connection, so a
  failover is followed as soon as the old primary's connections fail or turn read-only;
- Cluster: commands go to the slot's primary; every script's keys share one hash tag.
  Pub/sub uses classic channels, which a cluster forwards to all its nodes, so the
  subscriber may sit on any node and moves to another when its node goes away.
"""

from __future__ import annotations

import random
import socket
import struct
from typing import Any, cast

from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.connection import Connection
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel, SentinelManagedConnection
from redis.backoff import NoBackoff
from redis.exceptions import RedisClusterException, RedisError

from mediator.errors import StorageError
from mediator.storage.target import Mode, RedisTarget, parse

RedisClient = Redis | RedisCluster

# What a call to storage raises when it is unreachable or refuses, in every mode (a cluster's
# "cannot be connected" and "slot not covered" are not RedisErrors; TimeoutError is an OSError).
STORAGE_ERRORS: tuple[type[Exception], ...] = (
    RedisError,
    RedisClusterException,
    OSError,
    StorageError,
)

# What a refused write (Redis at maxmemory under noeviction, OutOfMemoryError) is answered:
# 507, nothing written; pickups and acknowledgements still work and free room.
STORAGE_FULL = "storage is full: nothing was stored; try again later"

_LINGER_ZERO = struct.pack("ii", 1, 0)


def _abortive(connection: Connection) -> None:
    """Close (later) with RST, dropping what the kernel still holds to send: a command this
    process has given up on must not run on the server once a partition heals."""
    writer = connection._writer
    sock = writer.transport.get_extra_info("socket") if writer is not None else None
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_ZERO)


class AbortiveConnection(Connection):
    async def _connect(self) -> None:
        await super()._connect()  # type: ignore[no-untyped-call]
        _abortive(self)


class AbortiveSentinelConnection(SentinelManagedConnection):
    async def _connect(self) -> None:
        await super()._connect()  # type: ignore[no-untyped-call]
        _abortive(self)


try:
    import hiredis

    class _HiredisPacking:
        """Packs commands with hiredis: the asyncio client packs them in Python, which costs
        about 40 us per script call on the hot path."""

        def pack_command(self, *args: Any) -> list[bytes]:
            head = args[0]
            if isinstance(head, str) and " " in head:  # e.g. "SCRIPT LOAD"
                args = (*head.split(), *args[1:])
            return [hiredis.pack_command(args)]

    class HiredisConnection(_HiredisPacking, AbortiveConnection):
        pass

    class HiredisSentinelConnection(_HiredisPacking, AbortiveSentinelConnection):
        pass

    CONNECTION_CLASS: type[Connection] = HiredisConnection
    SENTINEL_CONNECTION_CLASS: type[Connection] = HiredisSentinelConnection
except ImportError:  # hiredis is an install extra; without it the clients still work
    CONNECTION_CLASS = AbortiveConnection
    SENTINEL_CONNECTION_CLASS = AbortiveSentinelConnection

COMMAND_OPTIONS: dict[str, Any] = {
    "decode_responses": False,
    "socket_timeout": 10,  # every call is short: a few seconds is a real failure
    "socket_connect_timeout": 5,
    "health_check_interval": 30,
}
SUBSCRIBER_OPTIONS: dict[str, Any] = {
    "decode_responses": False,
    "socket_timeout": None,  # reads wait for the next message indefinitely
    "socket_connect_timeout": 5,
    "socket_keepalive": True,
    "health_check_interval": 15,  # and health checks find dead connections
}


# Connections per process to a server (per node of a cluster). A single server's pool makes a
# burst wait for a free one; Sentinel's and a cluster's pools (redis-py has no waiting kind
# for them) refuse beyond it, so they are given room for bursts of reconnecting wallets.
MAX_CONNECTIONS = 128
MAX_CONNECTIONS_REFUSING = 1024
POOL_WAIT_SECONDS = 5.0


def _no_retry() -> Retry:
    return Retry(NoBackoff(), 0)


class Backend:
    """How a process reaches Redis: a command client, subscriber clients, and clients pinned
    to the primary of one key's slot (WAIT must run on the connection that wrote)."""

    def __init__(
        self, target: RedisTarget | str, *, max_connections: int = MAX_CONNECTIONS
    ) -> None:
        self.target = parse(target) if isinstance(target, str) else target
        self.mode = self.target.mode
        self._max_connections = max_connections
        self._sentinel: Sentinel | None = None
        self._pinned: dict[str, Redis] = {}
        self.client: RedisClient = self._command_client()
        # Known once: isinstance on redis-py's clients (Protocols) costs 5 µs a call.
        self.cluster = isinstance(self.client, RedisCluster)

    async def start(self) -> None:
        """Learn the cluster's slots before the first command (the subscriber needs a node)."""
        if isinstance(self.client, RedisCluster):
            await self.client.initialize()

    async def aclose(self) -> None:
        for client in self._pinned.values():
            await client.aclose()
        self._pinned.clear()
        await self.client.aclose()
        if self._sentinel is not None:
            for sentinel in self._sentinel.sentinels:
                await sentinel.aclose()

    # ----------------------------------------------------------------- clients

    def _auth(self) -> dict[str, Any]:
        t = self.target
        options: dict[str, Any] = {"username": t.username, "password": t.password}
        if t.tls:
            options["ssl"] = True
        return options

    @property
    def _unix(self) -> bool:
        return self.target.url.startswith("unix:")

    def _packing(self, connection_class: type[Connection]) -> dict[str, Any]:
        """The hiredis-packing connection class, except over TLS or a Unix socket, where
        redis-py's own connection class must be kept (a class given here would replace it)."""
        return {} if self.target.tls or self._unix else {"connection_class": connection_class}

    def _command_client(self) -> RedisClient:
        t = self.target
        if t.mode is Mode.STANDALONE:
            # A burst wants more connections than the pool holds: it waits for one (up to
            # POOL_WAIT_SECONDS) rather than failing the request.
            pool = BlockingConnectionPool.from_url(
                t.url,
                max_connections=self._max_connections,
                timeout=POOL_WAIT_SECONDS,
                retry=_no_retry(),
                **self._packing(CONNECTION_CLASS),
                **COMMAND_OPTIONS,
            )
            return Redis(connection_pool=pool, retry=_no_retry())
        if t.mode is Mode.SENTINEL:
            return cast(
                Redis,
                self._sentinels().master_for(
                    t.service,
                    **self._packing(SENTINEL_CONNECTION_CLASS),
                    max_connections=self._refusing_limit,
                    retry=_no_retry(),
                    db=t.db,
                    **self._auth(),
                    **COMMAND_OPTIONS,
                ),
            )
        return RedisCluster(
            startup_nodes=[ClusterNode(host, port) for host, port in t.hosts],
            max_connections=self._refusing_limit,
            retry=_no_retry(),
            **self._auth(),
            **COMMAND_OPTIONS,
        )

    @property
    def _refusing_limit(self) -> int:
        """The limit of a pool that refuses beyond it (see MAX_CONNECTIONS_REFUSING)."""
        if self._max_connections == MAX_CONNECTIONS:
            return MAX_CONNECTIONS_REFUSING
        return self._max_connections

    def _sentinels(self) -> Sentinel:
        if self._sentinel is None:
            t = self.target
            sentinel_options: dict[str, Any] = {
                "socket_timeout": 2,
                "socket_connect_timeout": 2,
                "password": t.sentinel_password,
            }
            if t.tls:
                sentinel_options["ssl"] = True
            self._sentinel = Sentinel(  # type: ignore[no-untyped-call]
                list(t.hosts), sentinel_kwargs=sentinel_options
            )
        return self._sentinel

    def subscriber(self) -> Redis:
        """A new client for one pub/sub connection (made again after each failure)."""
        t = self.target
        if t.mode is Mode.STANDALONE:
            options = dict(SUBSCRIBER_OPTIONS)
            if self._unix:  # TCP keepalive has no meaning there (and is refused)
                del options["socket_keepalive"]
            return Redis.from_url(t.url, **options)
        if t.mode is Mode.SENTINEL:
            return cast(
                Redis,
                self._sentinels().master_for(
                    t.service, db=t.db, **self._auth(), **SUBSCRIBER_OPTIONS
                ),
            )
        assert isinstance(self.client, RedisCluster)
        nodes = self.client.get_nodes() or [ClusterNode(h, p) for h, p in t.hosts]
        node = random.choice(nodes)
        return Redis(host=node.host, port=int(node.port), **self._auth(), **SUBSCRIBER_OPTIONS)

    def pinned(self, key: str) -> Redis:
        """A client for the primary that holds `key`, whose pipelines run on one connection."""
        if not self.cluster:
            return cast(Redis, self.client)
        # SlotNotCoveredError when no node serves it
        node = cast(RedisCluster, self.client).get_node_from_key(key)
        if node is None:
            raise RedisClusterException(f"no cluster node serves the slot of {key!r}")
        return self.pinned_at(node.host, int(node.port))

    def pinned_at(self, host: str, port: int) -> Redis:
        """A client for one cluster node (the target of an ASK redirection, say)."""
        name = f"{host}:{port}"
        client = self._pinned.get(name)
        if client is None:
            client = Redis(
                host=host,
                port=port,
                max_connections=self._max_connections,
                retry=_no_retry(),
                **self._auth(),
                **COMMAND_OPTIONS,
            )
            self._pinned[name] = client
        return client

    def primaries(self) -> list[Redis]:
        """A pinned client for each primary: the one server, or every primary of a cluster."""
        if not isinstance(self.client, RedisCluster):
            return [self.client]
        return [self.pinned_at(n.host, int(n.port)) for n in self.client.get_primaries()]

    async def refresh_slots(self) -> None:
        """A pinned client met MOVED, or lost its node: learn where the slots live now."""
        if isinstance(self.client, RedisCluster):
            await self.client.nodes_manager.initialize()
