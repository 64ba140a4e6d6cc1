"""Every Redis key and channel name the product uses, built in this one module (layout 2).

Queues and DIDComm connections are spread over `SHARDS` storage shards by a hash of their
name, and every key of a shard carries the shard's hash tag `{<shard>}`: a queue's own keys,
its connection's record, and the shard's indexes and counters all sit in one cluster slot,
so each script updates a queue and the shard's bookkeeping atomically. With 1,024 shards the
tags fall on 1,024 distinct slots, spread evenly over any set of primaries.

    q:{S}:<ns>:<name>        the queue's config hash (a DIDComm connection's record too)
    q:{S}:<ns>:<name>:<x>    the queue's stream, in-flight set, ... (suffixes below)
    x:{S}:...                the shard's schedule, totals, in-flight buckets, oldest, registry,
                             senders' queued bytes in the shard
    d:{r<B>}:r, d:{o<B>}:o   recipient key -> connection, our key -> connection (16,384 buckets)
    sq:{<tag>}               a sender's queued bytes (one slot per sender)
    g:{g}:...                worker coordination: leases, hints, partition totals (small)

`SHARDS` and `BUCKETS` are part of the layout, not settings: changing them renames keys.
Layout 1's names, read only to convert a database, are in `legacy_keys`.
"""

from __future__ import annotations

import functools
import hashlib
import zlib
from dataclasses import dataclass

LAYOUT_VERSION = 2
SHARDS = 1024
BUCKETS = 16384
STREAM_GROUP = "g"
STREAM_CONSUMER = "c"

DIDCOMM_NAMESPACE = "didcomm"
MQS_NAMESPACE = "mqs"
NAMESPACES = (MQS_NAMESPACE, DIDCOMM_NAMESPACE)


def shard_tag(shard: int) -> str:
    """The hash tag every key of a shard carries: the cluster slot the shard lives in."""
    return f"{{{shard}}}"


def shard_of(qualified: str) -> int:
    """A queue's storage shard: the first 32 bits of the SHA-1 of its qualified name (Lua
    computes the same with `redis.sha1hex`, see forward.lua)."""
    return int.from_bytes(hashlib.sha1(qualified.encode()).digest()[:4], "big") % SHARDS


def _bucket(raw: bytes) -> int:
    return zlib.crc32(raw) % BUCKETS


# ------------------------------------------------------------------ queues

QUEUE_SUFFIXES = {
    "stream": ":s",
    "inflight": ":f",
    "receives": ":n",
    "delayed": ":dz",
    "delayed_bodies": ":db",
    "ids": ":id",
    "outbox": ":o",
    "waiters": ":w",
}


@dataclass(frozen=True, slots=True)
class QueueKeys:
    """The keys of one queue and of its shard, in the order the Lua scripts take them
    (`all`; `_lib.lua` names them in `queue_keys`)."""

    shard: int
    cfg: str  # hash: settings, counters, times (a DIDComm connection's record as well)
    stream: str  # stream + group `g`, one consumer `c`
    inflight: str  # sorted set: stream id -> visibility deadline (ms)
    receives: str  # hash: stream id -> receive count
    delayed: str  # sorted set: message id -> due time
    delayed_bodies: str  # hash: message id -> packed message
    ids: str  # hash: message id -> stream id, or d / o / x (delayed, outbox, deleted)
    outbox: str  # hash: dead-lettered messages on their way to the dead letter queue
    waiters: str  # hash: node channel -> until when (ms) that node waits on the queue
    due: str  # the shard's schedule (see shard_due)
    totals: str  # the namespace's totals in the shard (see shard_totals)
    flight: str  # the namespace's in-flight buckets in the shard (see shard_flight)
    oldest: str  # the namespace's oldest-message index in the shard (see shard_oldest)
    registry: str  # the namespace's queue names in the shard (see shard_registry)
    refs: str  # set: queues that use this one as their dead letter queue
    digests: str  # hash: envelope digest -> id of the queued message with those bytes

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
            self.due,
            self.totals,
            self.flight,
            self.oldest,
            self.registry,
        ]

    @property
    def own(self) -> list[str]:
        """The queue's own keys, without its shard's."""
        return [*self.all[:9], self.refs, self.digests]


def queue_keys(qualified: str, shard: int | None = None) -> QueueKeys:
    """`shard`: the queue's shard when the caller knows it already (its registry named the
    queue), saving the hash of its name."""
    if shard is None:
        shard = shard_of(qualified)
    namespace = qualified.partition(":")[0]
    base = f"q:{shard_tag(shard)}:{qualified}"
    s = QUEUE_SUFFIXES
    return QueueKeys(
        shard=shard,
        cfg=base,
        stream=base + s["stream"],
        inflight=base + s["inflight"],
        receives=base + s["receives"],
        delayed=base + s["delayed"],
        delayed_bodies=base + s["delayed_bodies"],
        ids=base + s["ids"],
        outbox=base + s["outbox"],
        waiters=base + s["waiters"],
        due=shard_due(shard),
        totals=shard_totals(shard, namespace),
        flight=shard_flight(shard, namespace),
        oldest=shard_oldest(shard, namespace),
        registry=shard_registry(shard, namespace),
        refs=base + ":rf",
        digests=base + ":dg",  # scripts derive it from cfg (_lib.lua queue_keys)
    )


@functools.cache
def queue_key_templates(namespace: str) -> list[str]:
    """`queue_keys(...).all` of the namespace with `$S` for the shard and `$N` for the
    name: what forward.lua fills in once it has read which queue a route names."""
    out = []
    for key in queue_keys(f"{namespace}:\x00").all:
        key = key.replace("\x00", "$N")
        shard = key[key.index("{") + 1 : key.index("}")]
        out.append(key.replace("{" + shard + "}", "{$S}", 1))
    return out


# ------------------------------------------------------------------ shards


def shard_due(shard: int) -> str:
    """Sorted set: what in the shard is due when (ms): a queue's upkeep (member: qualified
    name), a connection's push retry (`@push:<connection>`) or pending phone notification
    (`@note:<connection>`), expired forwarding entries
    (`@moved`), senders' totals to copy into their counts (`@sb`). Workers touch a queue
    only when it is due here."""
    return f"x:{shard_tag(shard)}:due"


def shard_totals(shard: int, namespace: str) -> str:
    """Hash: the namespace's queues in the shard, kept by the scripts that change them:
    q (queues), n (stored messages), d (delayed), b (body bytes), and cumulative counters
    add, dlv (handed out), ack, exp (expired), dl (dead-lettered), drop (with a queue)."""
    return f"x:{shard_tag(shard)}:tot:{namespace}"


def shard_flight(shard: int, namespace: str) -> str:
    """Hash: second -> how many handed-out messages become visible again in it (their
    deadline, rounded up). Messages in flight now = the sum over the seconds to come."""
    return f"x:{shard_tag(shard)}:fl:{namespace}"


def shard_oldest(shard: int, namespace: str) -> str:
    """Sorted set: queue name -> first enqueue time (ms) of its oldest stored message."""
    return f"x:{shard_tag(shard)}:old:{namespace}"


def shard_registry(shard: int, namespace: str) -> str:
    """Set: names of the namespace's queues in the shard (for the audit and snapshots)."""
    return f"x:{shard_tag(shard)}:reg:{namespace}"


def shard_senders(shard: int) -> str:
    """Hash: sender tag -> bytes of its messages in the shard's queues (kept by the scripts
    that store and remove them). The scripts derive it from `shard_due` (`_lib.lua`
    queue_keys)."""
    return f"x:{shard_tag(shard)}:sb"


def shard_senders_changed(shard: int) -> str:
    """Set: senders whose total in the shard changed since a worker last copied it into
    their count (`sender_queued`); member `SENDERS_MEMBER` of the shard's schedule says
    when that is due. Derived like `shard_senders`."""
    return f"x:{shard_tag(shard)}:sbd"


def moved(shard: int) -> str:
    """Hash: message id -> qualified name of the dead letter queue that now holds it, for
    the messages of the shard's queues (the shard of the queue the id names)."""
    return f"x:{shard_tag(shard)}:moved"


def moved_expiry(shard: int) -> str:
    """Sorted set: message id -> time (ms) its forwarding entry may be forgotten."""
    return f"x:{shard_tag(shard)}:moved-exp"


PUSH_MEMBER = "@push:"  # + connection: a push retry in the shard's schedule
NOTE_MEMBER = "@note:"  # + connection: a phone notification pending (mediator/notify)
MOVED_MEMBER = "@moved"  # expired forwarding entries to forget
SENDERS_MEMBER = "@sb"  # changed senders' totals to copy (shard_senders_changed)


def mqs_names() -> str:
    """Sorted set (scores 0) of mqs queue names, for listing in name order. mqs queues are
    an operator's own, not one per recipient; DIDComm queues are not listed."""
    return "x:mqs-names"


# ------------------------------------------------------------------ workers and nodes

GLOBAL = "g:{g}"


def layout() -> str:
    """Hash: version, shards, buckets: what this database holds (written once)."""
    return f"{GLOBAL}:layout"


def next_due() -> str:
    """Sorted set: shard -> the earliest time something in it may be due (a hint: a worker
    that finds nothing due there sets it again from the shard's schedule)."""
    return f"{GLOBAL}:next"


def workers() -> str:
    """Sorted set: worker id -> time (ms) its heartbeat expires."""
    return f"{GLOBAL}:workers"


def leases() -> str:
    """Hash: partition -> `<worker id> <until ms>` (leases.Lease)."""
    return f"{GLOBAL}:leases"


def partition_stats(partition: int) -> str:
    """Hash: the totals of one worker partition's shards, written by its lease holder."""
    return f"{GLOBAL}:stats:{partition}"


def audit_cursor() -> str:
    """Hash: partition -> where its audit stopped (`<shard> <namespace> <scan cursor>`)."""
    return f"{GLOBAL}:audit"


def nodes() -> str:
    """Sorted set: node id -> until when (ms) the node is alive (its heartbeat lease)."""
    return f"{GLOBAL}:nodes"


def node_channel(node_id: str) -> str:
    """The one pub/sub channel each node listens on: `wake <queue> <count> <due> <now>` from
    the scripts, for queues the node waits on, and `takeover <connection> <socket>` when
    another socket took over a recipient that one of its sockets held."""
    return f"g:node:{node_id}"


def partition_of(shard: int, partitions: int) -> int:
    return shard % partitions


def partition_shards(partition: int, partitions: int) -> range:
    return range(partition, SHARDS, partitions)


# ------------------------------------------------------------------ DIDComm
# A connection is named by the peer's verkey V and lives with its queue `didcomm:V`: its
# record is that queue's config hash, and its thread orders and presence sit beside it.

ROUTES_CHANNEL = "d:routes"  # "<recipient key>" whose route was removed


@dataclass(frozen=True, slots=True)
class ConnectionKeys:
    record: str  # hash: handshake, mediation state, keylist (`k:<key>` fields), the queue
    threads: str  # hash: per-thread sender orders (RFC 0008), with a sliding expiry
    threads_before: str  # hash: their previous generation (thread_orders in _lib.lua)
    presence: str  # string "<node>/<socket>" holding its live socket
    device: str  # string: its phone's device token (mediator/notify), apart from the record
    push: str  # string, short-lived: which pusher holds its push (mediator/mediation/push.py)


def connection_keys(verkey: str, shard: int | None = None) -> ConnectionKeys:
    """`shard`: as for `queue_keys`."""
    base = queue_keys(f"{DIDCOMM_NAMESPACE}:{verkey}", shard).cfg
    return ConnectionKeys(
        record=base,
        threads=base + ":t",
        threads_before=base + ":t:o",
        presence=base + ":p",
        device=base + ":d",
        push=base + ":pl",
    )


def routes_bucket(recipient_key: bytes) -> str:
    """Hash: recipient key (32 raw bytes) -> the connection (verkey) that registered it."""
    return routes_bucket_at(_bucket(recipient_key))


def routes_bucket_at(bucket: int) -> str:
    """The routes bucket numbered `bucket` (0 to BUCKETS - 1)."""
    return f"d:{{r{bucket}}}:r"


def ours_bucket(our_key: bytes) -> str:
    """Hash: our key on a granted connection (32 raw bytes) -> the connection (verkey)."""
    return ours_bucket_at(_bucket(our_key))


def ours_bucket_at(bucket: int) -> str:
    """The our-keys bucket numbered `bucket` (0 to BUCKETS - 1)."""
    return f"d:{{o{bucket}}}:o"


def our_key_pending(verkey: str) -> str:
    """String, with the unmediated connection's expiry: our key on a connection not granted
    mediation yet -> the connection; moved into `ours_bucket` at the grant."""
    return f"d:o:{verkey}"


def rate_window(kind: str, subject: str) -> str:
    """String: what `subject` (a client address, a sender) used of limit `kind` in the
    current window (mediator/mediation/abuse.py); expires with the window."""
    return f"rl:{{{kind}:{subject}}}"


def sender_queued(tag: str) -> str:
    """Hash: shard -> bytes a sender (its tag: mediator/mediation/senders.py) has queued in
    it, as the workers last copied them, and `SENDER_QUEUED_SUM` their sum (sender_count.lua);
    expires when untouched for longer than a message may wait."""
    return f"sq:{{{tag}}}"


SENDER_QUEUED_SUM = "@"


def senders_over() -> str:
    """Sorted set: tag -> until when (ms) the sender is refused forwards, having more
    queued than --limit-sender-queued-bytes (written by workers, read by every node)."""
    return f"{GLOBAL}:sq-over"


def mediator_identity() -> str:
    """Hash holding the mediator's key seed (field `IDENTITY_SEED`, 64 hex digits), written
    once (HSETNX) and shared by all nodes."""
    return "d:identity"


IDENTITY_SEED = "seed"


def imported() -> str:
    """Hash: what `mediator import` carried over from another mediator: its routing and
    invitation keys (sealed), invitations, endpoints and their paths, and which store it
    was (mediator/mediation/imported.py)."""
    return "d:imported"


def invitation(verkey: str) -> str:
    """Hash: a single-use invitation's key seed and id, until a request consumes it."""
    return f"d:inv:{verkey}"
