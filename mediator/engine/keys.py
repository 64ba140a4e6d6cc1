"""Every Redis key and channel name the product uses, built in this one module.

All keys of one queue share the hash tag `{q:<namespace>:<name>}`, so every per-queue
script touches a single cluster slot. The few global keys (queue registry, upkeep shards,
leases, the dead-letter forwarding index) are only ever used by single-key commands.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

PREFIX = "mq"
STREAM_GROUP = "g"
STREAM_CONSUMER = "c"


@dataclass(frozen=True)
class QueueKeys:
    """The keys of one queue, in the order the Lua scripts expect them."""

    cfg: str
    stream: str
    inflight: str
    receives: str
    delayed: str
    delayed_bodies: str
    ids: str
    outbox: str
    waiters: str  # hash: node channel -> until when (ms) that node waits on the queue
    refs: str

    @property
    def all(self) -> list[str]:
        return [
            self.cfg,
            self.stream,
            self.inflight,
            self.receives,
            self.delayed,
            self.delayed_bodies,
            self.ids,
            self.outbox,
            self.waiters,
        ]


def queue_keys(qualified: str) -> QueueKeys:
    tag = f"{PREFIX}:{{q:{qualified}}}"
    return QueueKeys(
        cfg=f"{tag}:cfg",
        stream=f"{tag}:s",
        inflight=f"{tag}:inflight",
        receives=f"{tag}:rc",
        delayed=f"{tag}:delayed",
        delayed_bodies=f"{tag}:dbody",
        ids=f"{tag}:ids",
        outbox=f"{tag}:dlqout",
        waiters=f"{tag}:waiters",
        refs=f"{tag}:refs",
    )


def node_channel(node_id: str) -> str:
    """The one pub/sub channel each node listens on: `wake <queue> <count> <due> <now>` from
    the scripts, for queues the node waits on, and `takeover <connection> <socket>` when
    another socket took over a recipient that one of its sockets held."""
    return f"{PREFIX}:node:{node_id}"


def registry(namespace: str) -> str:
    """Sorted set (all scores 0, so ordered by name) of the namespace's queue names."""
    return f"{PREFIX}:registry:{namespace}"


def shard_of(value: str, shards: int) -> int:
    return zlib.crc32(value.encode()) % shards


def upkeep_due(shard: int) -> str:
    """Sorted set: qualified queue name -> Redis time (ms) its upkeep is next due."""
    return f"{PREFIX}:due:{shard}"


def moved(shard: int) -> str:
    """Hash: message id -> qualified name of the dead letter queue that now holds it."""
    return f"{PREFIX}:moved:{shard}"


def moved_expiry(shard: int) -> str:
    """Sorted set: message id -> time (ms) its forwarding entry may be forgotten."""
    return f"{PREFIX}:moved-exp:{shard}"


def lease(shard: int) -> str:
    return f"{PREFIX}:lease:{shard}"


def workers() -> str:
    """Sorted set: worker id -> time (ms) its heartbeat expires."""
    return f"{PREFIX}:workers"


def shard_stats(shard: int) -> str:
    """Hash of a shard's queue totals, written by the worker that holds its lease."""
    return f"{PREFIX}:stats:{shard}"


# ------------------------------------------------------------------ DIDComm state
# A connection's keys share the hash tag `{c:<connection verkey>}`; its queue is the engine
# queue `didcomm:<connection verkey>`. Routes (recipient key -> connection) are global keys
# used by single-key commands only.

DIDCOMM_NAMESPACE = "didcomm"
DIDCOMM_PREFIX = "dc"


@dataclass(frozen=True)
class ConnectionKeys:
    record: str  # hash: mediation state, times, flags
    keylist: str  # sorted set (scores 0: name order) of the recipient keys it registered
    threads: str  # hash: per-thread sender orders (RFC 0008), with a sliding expiry
    presence: str  # string "<node>/<socket>" holding its live socket, with a short TTL


def connection_keys(verkey: str) -> ConnectionKeys:
    tag = f"{DIDCOMM_PREFIX}:{{c:{verkey}}}"
    return ConnectionKeys(
        record=f"{tag}:conn", keylist=f"{tag}:keys", threads=f"{tag}:thr", presence=f"{tag}:live"
    )


ROUTES_CHANNEL = f"{DIDCOMM_PREFIX}:routes"  # "<recipient key>" whose route was removed


def route(recipient_key: str) -> str:
    """String: recipient key (base58) -> the connection verkey that registered it."""
    return f"{DIDCOMM_PREFIX}:route:{recipient_key}"


def mediator_identity() -> str:
    """Hash holding the mediator's key seed, written once (HSETNX) and shared by all nodes."""
    return f"{DIDCOMM_PREFIX}:identity"


def invitation(verkey: str) -> str:
    """Hash: a single-use invitation's key seed and id, until a request consumes it."""
    return f"{DIDCOMM_PREFIX}:inv:{verkey}"


def push_due(shard: int) -> str:
    """Sorted set: connection verkey -> when its queue should next be pushed (ms)."""
    return f"{DIDCOMM_PREFIX}:push:{shard}"


def our_key(verkey: str) -> str:
    """String: our per-connection verkey -> the peer's verkey (which names the connection)."""
    return f"{DIDCOMM_PREFIX}:ours:{verkey}"
