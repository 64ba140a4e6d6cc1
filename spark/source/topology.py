"""Which Redis servers there are and which engine shards each one holds.

Standalone and Sentinel: one primary (found through the sentinels) holds every shard, and
its replicas copy it. Cluster: `CLUSTER SHARDS` names each shard's slot ranges and nodes;
an engine shard `S` lives in the slot of its hash tag `{S}`. `--read-from replica` moves
the reads of each primary's shards to one of its online replicas (or keeps the primary
when it has none, which the snapshot records).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import redis
from redis.crc import key_slot
from redis.sentinel import Sentinel

from mediator.engine import keys
from mediator.errors import StorageError
from mediator.storage.target import Mode, RedisTarget


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int
    path: str = ""  # a Unix socket instead of host:port

    @property
    def address(self) -> str:
        return self.path or f"{self.host}:{self.port}"


@dataclass(frozen=True)
class Auth:
    """What every connection needs besides its address (it travels to the executors)."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    db: int = 0

    def connect(self, at: Endpoint, *, timeout: float = 30.0) -> redis.Redis:
        common: dict[str, Any] = {
            "username": self.username,
            "password": self.password,
            "db": self.db,
            "socket_timeout": timeout,
            "socket_connect_timeout": min(timeout, 5.0),
            "decode_responses": False,
            "protocol": 2,  # the readers parse RESP2 replies (flat lists)
        }
        if at.path:
            return redis.Redis(unix_socket_path=at.path, **common)
        return redis.Redis(host=at.host, port=at.port, ssl=self.tls, **common)


@dataclass
class Server:
    endpoint: Endpoint
    role: str  # primary | replica
    primary: Endpoint | None = None  # a replica's primary
    slots: list[tuple[int, int]] = field(default_factory=list)  # a cluster primary's ranges
    shards: list[int] = field(default_factory=list)  # engine shards it holds (primaries)


@dataclass
class Topology:
    mode: Mode
    auth: Auth
    servers: list[Server]
    read_from: str  # primary | replica

    @property
    def primaries(self) -> list[Server]:
        return [s for s in self.servers if s.role == "primary"]

    def replicas_of(self, primary: Server) -> list[Server]:
        return [s for s in self.servers if s.role == "replica" and s.primary == primary.endpoint]

    def reading(self) -> list[tuple[Server, Server]]:
        """(primary, the server its shards are read from) for every primary."""
        out = []
        for p in self.primaries:
            replicas = self.replicas_of(p) if self.read_from == "replica" else []
            out.append((p, replicas[0] if replicas else p))
        return out

    def control(self) -> redis.Redis | redis.RedisCluster:
        """A client for the few keys outside the shards (identity, workers, nodes)."""
        if self.mode is Mode.CLUSTER:
            first = self.primaries[0].endpoint
            return redis.RedisCluster(
                host=first.host,
                port=first.port,
                username=self.auth.username,
                password=self.auth.password,
                ssl=self.auth.tls,
                socket_timeout=30,
            )
        return self.auth.connect(self.primaries[0].endpoint)


def shard_slot(shard: int) -> int:
    return key_slot(keys.shard_tag(shard).encode())


def discover(target: RedisTarget, read_from: str) -> Topology:
    """Ask the deployment what it is made of; StorageError when it cannot be reached."""
    auth = Auth(target.username, target.password, target.tls, target.db)
    try:
        if target.mode is Mode.CLUSTER:
            servers = _cluster(target, auth)
        elif target.mode is Mode.SENTINEL:
            servers = _sentinel(target, auth)
        else:
            servers, auth = _standalone(target, auth)
    except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
        raise StorageError(f"cannot reach Redis at {target.redacted}: {e}") from None
    except redis.AuthenticationError as e:
        raise StorageError(f"Redis at {target.redacted} refused the credentials: {e}") from None
    except redis.ResponseError as e:
        raise StorageError(f"Redis at {target.redacted} answered: {e}") from None
    return Topology(target.mode, auth, servers, read_from)


def _standalone(target: RedisTarget, auth: Auth) -> tuple[list[Server], Auth]:
    """The URL's server (its user, password and database are in the URL)."""
    client = redis.Redis.from_url(target.url, socket_connect_timeout=5, socket_timeout=30)
    kwargs = client.connection_pool.connection_kwargs
    path = kwargs.get("path", "")
    at = Endpoint(kwargs.get("host", ""), int(kwargs.get("port", 0) or 0), path)
    auth = Auth(kwargs.get("username"), kwargs.get("password"), auth.tls, kwargs.get("db", 0))
    info = client.info("replication")
    client.close()
    primary = Server(at, "primary", shards=list(range(keys.SHARDS)))
    return [primary, *_replicas_in(info, at)], auth


def _replicas_in(info: dict[str, Any], primary: Endpoint) -> list[Server]:
    """The online replicas a primary's INFO replication lists."""
    out = []
    for name, value in info.items():
        if name.startswith("slave") and isinstance(value, dict) and value.get("state") == "online":
            out.append(Server(Endpoint(str(value["ip"]), int(value["port"])), "replica", primary))
    return out


def _sentinel(target: RedisTarget, auth: Auth) -> list[Server]:
    sentinel_kwargs = {"password": target.sentinel_password, "socket_timeout": 5}
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(target.hosts), sentinel_kwargs=sentinel_kwargs, socket_timeout=5
    )
    try:
        host, port = sentinel.discover_master(target.service)  # type: ignore[no-untyped-call]
    except redis.sentinel.MasterNotFoundError as e:
        raise StorageError(
            f"no sentinel at {target.redacted} knows {target.service!r}: {e}"
        ) from None
    at = Endpoint(str(host), int(port))
    primary = Server(at, "primary", shards=list(range(keys.SHARDS)))
    replicas = [
        Server(Endpoint(str(h), int(p)), "replica", at)
        for h, p in sentinel.discover_slaves(target.service)  # type: ignore[no-untyped-call]
    ]
    return [primary, *replicas]


def _cluster(target: RedisTarget, auth: Auth) -> list[Server]:
    host, port = target.hosts[0]
    client = auth.connect(Endpoint(host, port))
    reply = client.execute_command("CLUSTER SHARDS")  # type: ignore[no-untyped-call]
    client.close()
    servers: list[Server] = []
    for shard in reply:
        entry = _pairs(shard)
        ranges = [int(x) for x in entry[b"slots"]]
        slots = list(zip(ranges[::2], ranges[1::2], strict=True))
        nodes = [_pairs(n) for n in entry[b"nodes"]]
        primaries = [n for n in nodes if n[b"role"] == b"master" and n[b"health"] == b"online"]
        if not primaries or not slots:
            continue
        p = primaries[0]
        primary = Server(_node_endpoint(p), "primary", slots=slots)
        servers.append(primary)
        for n in nodes:
            if n[b"role"] != b"master" and n[b"health"] == b"online":
                servers.append(Server(_node_endpoint(n), "replica", primary.endpoint))
    owner = {}
    for s in servers:
        for first, last in s.slots:
            for slot in range(first, last + 1):
                owner[slot] = s
    for shard in range(keys.SHARDS):
        holder = owner.get(shard_slot(shard))
        if holder is None:
            raise StorageError(f"no primary serves the slot of engine shard {shard}")
        holder.shards.append(shard)
    return servers


def _pairs(flat: Any) -> dict[bytes, Any]:
    if isinstance(flat, dict):
        return {k if isinstance(k, bytes) else str(k).encode(): v for k, v in flat.items()}
    return {flat[i]: flat[i + 1] for i in range(0, len(flat), 2)}


def _node_endpoint(node: dict[bytes, Any]) -> Endpoint:
    ip = node.get(b"ip") or node.get(b"endpoint") or b"127.0.0.1"
    port = node.get(b"port") or node.get(b"tls-port") or 0
    return Endpoint(ip.decode() if isinstance(ip, bytes) else str(ip), int(port))
