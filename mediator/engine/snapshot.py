"""A capacity snapshot's read of one shard's queues, a page a call of snapshot_page.lua (read
only: replicas serve it with EVALSHA_RO): the call's keys and arguments, what it costs in
commands, and its reply. spark/source/reader.py sends it over a connection of its own and
pages the queues by their cost.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mediator.engine import keys
from mediator.engine.model import QUEUE_FIELDS, QueueStats
from mediator.engine.replies import Reply, queue_stats, text

SCRIPT = "snapshot_page"
# Commands the script runs for a queue: its config hash, a DIDComm queue's presence, an mqs
# queue's dead letter users and outbox, and queue_counts (_lib.lua) for a queue that may
# hold messages (two more with delayed messages, two with messages in flight).
CONFIG_COST, PRESENCE_COST, MQS_COST, HELD_COST = 1, 1, 2, 9
COUNT_FIELDS = ("bytes", "created", "la", "ld", "lr")  # config fields the scripts keep
SETTING_FIELDS = tuple(f for f in QUEUE_FIELDS if f not in COUNT_FIELDS)
# An imported connection's sealed key (mediator/mediation/record.py IMPORTED_KEY).
SEALED_FIELD = "ik"


@dataclass(frozen=True, slots=True)
class PageQueue:
    """A queue of the shard being read, named by one of the shard's registries (its keys
    are built from that shard: the name is not hashed again). `may_hold`: the shard's
    oldest index or schedule names it, so it may hold messages."""

    namespace: str
    name: str
    may_hold: bool
    queue: keys.QueueKeys
    connection: keys.ConnectionKeys | None  # a DIDComm queue's

    @classmethod
    def of(cls, shard: int, namespace: str, name: str, may_hold: bool) -> PageQueue:
        qk = keys.queue_keys(f"{namespace}:{name}", shard)
        didcomm = namespace == keys.DIDCOMM_NAMESPACE
        conn = keys.connection_keys(name, shard) if didcomm else None
        return cls(namespace, name, may_hold, qk, conn)

    @property
    def mqs(self) -> bool:
        return self.namespace == keys.MQS_NAMESPACE

    @property
    def cost(self) -> int:
        held = HELD_COST if self.may_hold else 0
        return CONFIG_COST + held + (MQS_COST if self.mqs else PRESENCE_COST)

    @property
    def script_keys(self) -> list[str]:
        q = self.queue
        presence = self.connection.presence if self.connection else q.cfg
        return [q.cfg, q.stream, q.inflight, q.receives, q.delayed, q.delayed_bodies, q.refs,
                q.outbox, presence]  # fmt: skip

    @property
    def memory_keys(self) -> list[str]:
        """Every key the queue may hold and its connection's (but the short-lived push
        lease): what its memory is the sum of."""
        c = self.connection
        theirs = (c.presence, c.threads, c.threads_before, c.device) if c else ()
        return [*self.queue.own, *theirs]


def page_call(page: Sequence[PageQueue], listed: int) -> tuple[list[str], list[Any]]:
    """The script's KEYS and ARGV for a page of one shard's queues; `listed`: the most
    receive counts of in-flight messages to list per queue."""
    shard = page[0].queue.shard
    script_keys = [keys.shard_due(shard)]
    args: list[Any] = [listed]
    for q in page:
        assert q.queue.shard == shard, "a page holds one shard's queues"
        script_keys += q.script_keys
        args += [("m" if q.may_hold else "") + ("q" if q.mqs else ""), f"{q.namespace}:{q.name}"]
    return script_keys, args


@dataclass(frozen=True, slots=True)
class QueueReading:
    """One queue of a page: its counts as queue_stats.lua reports them (for a queue not
    marked as holding messages, those its config hash keeps), the settings the hash stores
    (for QueueConfig.from_fields), the whole hash (a DIDComm connection's record), the live
    socket holding it (`<node>/<socket>`, or ''), the receive counts of its in-flight
    messages, and an mqs queue's dead letter users and outbox."""

    created_ms: int
    stats: QueueStats
    settings: dict[str, str]
    record: dict[str, bytes]
    presence: str
    receives: tuple[int, ...]
    dead_letter_users: int | None
    outbox: int | None

    @classmethod
    def decode(cls, r: Reply, now_ms: int) -> QueueReading | None:
        """None when the queue is gone (deleted after its registry named it)."""
        flat, presence, counts, receives, users, outbox = r
        record = {flat[i].decode("latin-1"): flat[i + 1] for i in range(0, len(flat), 2)}
        if "created" not in record:
            return None
        record.pop(SEALED_FIELD, None)  # never leaves the reader, even sealed
        stats = queue_stats(counts) if counts else None
        if stats is None:
            stats = QueueStats(
                now_ms=now_ms,
                stored=0,
                in_flight=0,
                delayed=0,
                oldest_ms=None,
                bytes=int(record.get("bytes", b"0")),
                last_added_ms=_ms(record.get("la")),
                last_delivered_ms=_ms(record.get("ld")),
                last_removed_ms=_ms(record.get("lr")),
            )
        return cls(
            created_ms=int(record["created"]),
            stats=stats,
            settings={f: record[f].decode() for f in SETTING_FIELDS if f in record},
            record=record,
            presence=text(presence),
            receives=tuple(int(c) for c in receives),
            dead_letter_users=_count(users),
            outbox=_count(outbox),
        )


@dataclass(frozen=True, slots=True)
class SnapshotPage:
    """snapshot_page.lua's reply: the server's time, the commands the script ran, and a
    reading per queue of the page, in the page's order."""

    now_ms: int
    commands: int
    queues: tuple[QueueReading | None, ...]

    @classmethod
    def decode(cls, r: Reply) -> SnapshotPage:
        now = int(r[0])
        return cls(now, int(r[1]), tuple(QueueReading.decode(q, now) for q in r[2:]))


def _ms(value: bytes | None) -> int | None:
    return None if value is None else int(value)


def _count(value: Any) -> int | None:
    """A count the script sends as -1 when it did not read it."""
    return None if int(value) < 0 else int(value)
