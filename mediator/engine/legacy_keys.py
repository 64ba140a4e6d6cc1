"""Key names of layout 1, the earlier layout (before the storage shards, version 0.1).

This version never writes them: `layout.holds_layout_1` looks for them to refuse such a
database, and `mediator migrate` reads them to convert it (`keys` holds layout 2).

    mq:{q:<ns>:<name>}:<x>    a queue's config (`cfg`) and data keys (`QUEUE_DATA`), waiters
    dc:{c:<verkey>}:<x>       a connection's record, keylist, thread orders, presence
    dc:route:<key>            recipient key (base58) -> connection
    dc:ours:<key>             our key on a connection (base58) -> the peer's verkey
    dc:inv:<verkey>           a single-use invitation
    dc:push:<shard>           push retries;  mq:moved:<shard>, mq:moved-exp:<shard>  forwarding
    dc:identity, mq:workers, mq:registry:<ns>, mq:due:, mq:lease:, mq:stats:  global
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

from mediator.engine.keys import DIDCOMM_NAMESPACE, MQS_NAMESPACE

_QUEUE = "mq:{q:"
_CONNECTION = "dc:{c:"
_ROUTE = "dc:route:"
_OURS = "dc:ours:"
_INVITATION = "dc:inv:"
_PUSH = "dc:push:"
_MOVED = "mq:moved:"
_MOVED_EXPIRY = "mq:moved-exp:"
_REGISTRY = "mq:registry:"
# Global indexes of layout 1 that layout 2 rebuilds or has no use for.
_GLOBAL_PREFIXES = (_REGISTRY, "mq:due:", "mq:lease:", "mq:stats:", _MOVED_EXPIRY)

QUEUE_CONFIG = "cfg"  # suffix of a layout-1 queue's config hash
QUEUE_WAITERS = "waiters"  # suffix of its waiters hash (dropped: nodes wait anew)
# Suffixes of a layout-1 queue's data keys, and the `keys.QueueKeys` attribute naming each
# in layout 2.
QUEUE_DATA = {
    "s": "stream",
    "inflight": "inflight",
    "rc": "receives",
    "delayed": "delayed",
    "dbody": "delayed_bodies",
    "ids": "ids",
    "dlqout": "outbox",
    "refs": "refs",
}
IDENTITY_SEED = "seed"  # the field of `identity()` holding the mediator's key seed


def queue(qualified: str, suffix: str) -> str:
    """A layout-1 queue's key: config (`QUEUE_CONFIG`), data (`QUEUE_DATA`) or waiters."""
    return f"{_QUEUE}{qualified}}}:{suffix}"


@dataclass(frozen=True, slots=True)
class ConnectionKeys:
    """A layout-1 connection's keys (its queue is the queue `didcomm:<verkey>`)."""

    record: str  # hash: handshake, mediation state, times, the peer's document
    keylist: str  # sorted set: the recipient keys it registered (base58)
    threads: str  # hash: per-thread sender orders
    presence: str  # string: the node and socket holding its live socket


_RECORD = "conn"


def connection_keys(verkey: str) -> ConnectionKeys:
    base = f"{_CONNECTION}{verkey}}}:"
    return ConnectionKeys(
        record=base + _RECORD, keylist=base + "keys", threads=base + "thr", presence=base + "live"
    )


def route(recipient_key: str) -> str:
    """Layout 1's string: recipient key (base58) -> the connection that registered it."""
    return f"{_ROUTE}{recipient_key}"


def our_key(verkey: str) -> str:
    """Layout 1's string: our key on a connection (base58) -> the peer's verkey."""
    return f"{_OURS}{verkey}"


def invitation(verkey: str) -> str:
    """Layout 1's hash of a single-use invitation, until a request consumes it."""
    return f"{_INVITATION}{verkey}"


def push_due(shard: str) -> str:
    """Layout 1's sorted set: connection -> when its queue is next pushed (ms); `shard` as
    the key's name spells it."""
    return f"{_PUSH}{shard}"


def moved(shard: str) -> str:
    """Layout 1's hash: message id -> the dead letter queue that now holds it."""
    return f"{_MOVED}{shard}"


def moved_expiry(shard: str) -> str:
    """Layout 1's sorted set: message id -> when its forwarding entry may be forgotten."""
    return f"{_MOVED_EXPIRY}{shard}"


def registry(namespace: str) -> str:
    """Layout 1's sorted set (scores 0) of the namespace's queue names."""
    return f"{_REGISTRY}{namespace}"


def workers() -> str:
    """Layout 1's sorted set: worker id -> when its heartbeat expires (ms)."""
    return "mq:workers"


def identity() -> str:
    """Layout 1's hash of the mediator's key seed (field `IDENTITY_SEED`)."""
    return "dc:identity"


# Keys every layout-1 database has: the mediator's seed, the workers, a queue registry.
MARKS = (identity(), workers(), registry(MQS_NAMESPACE), registry(DIDCOMM_NAMESPACE))


Kind = Literal[
    "queue",  # name: the qualified queue name (its config hash exists)
    "queue data",  # name: the qualified queue name; suffix: which of its keys
    "connection",  # name: its verkey (its record exists)
    "route",  # name: the recipient key
    "ours",  # name: our key on the connection
    "invitation",  # name: the invitation's verkey
    "push",  # name: the shard, as the key spells it
    "moved",  # name: the shard, as the key spells it
    "global",  # name: the whole key
    "",  # converted with its entity, or not a layout-1 key
]


class Entity(NamedTuple):
    kind: Kind
    name: str = ""
    suffix: str = ""


def entity(key: str) -> Entity:
    """What a layout-1 key is: the inverse of the functions above."""
    if key.startswith(_QUEUE):
        qualified, _, suffix = key[len(_QUEUE) :].rpartition("}:")
        if suffix == QUEUE_CONFIG:
            return Entity("queue", qualified)
        return Entity("queue data", qualified, suffix)
    if key.startswith(_CONNECTION) and key.endswith("}:" + _RECORD):
        return Entity("connection", key[len(_CONNECTION) : -len("}:" + _RECORD)])
    named: tuple[tuple[str, Kind], ...] = (
        (_ROUTE, "route"),
        (_OURS, "ours"),
        (_INVITATION, "invitation"),
        (_PUSH, "push"),
        (_MOVED, "moved"),
    )
    for prefix, kind in named:
        if key.startswith(prefix):
            return Entity(kind, key[len(prefix) :])
    if key == workers() or key.startswith(_GLOBAL_PREFIXES):
        return Entity("global", key)
    return Entity("")
