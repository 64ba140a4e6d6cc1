"""Replies of the scripts the workers run over a shard or the whole cluster: the shard's
totals, the partition leases, the audit, the senders' queued bytes."""

from __future__ import annotations

from dataclasses import dataclass

from mediator.engine import keys
from mediator.engine.replies.common import Reply, text


@dataclass(frozen=True, slots=True)
class ShardStatsReply:
    """shard_stats.lua: per namespace, the values of books.FIELDS (the totals and the
    in-flight count) and the oldest first enqueue time (-1: none)."""

    now_ms: int
    values: dict[str, list[int]]
    oldest_ms: dict[str, int]

    @classmethod
    def decode(cls, r: Reply) -> ShardStatsReply:
        values, oldest = {}, {}
        for i, ns in enumerate(keys.NAMESPACES):
            part = [int(v) for v in r[1 + 12 * i : 13 + 12 * i]]
            values[ns], oldest[ns] = part[:11], part[11]
        return cls(int(r[0]), values, oldest)


def held_partitions(r: Reply) -> list[int]:
    """leases.lua: the partitions the worker holds afterwards, in order."""
    return sorted(int(p) for p in r)


@dataclass(frozen=True, slots=True)
class AuditReply:
    """audit.lua: the queues checked, what was repaired (counts), and the names (within the
    namespace) of the queues found gone."""

    checked: int
    orphan_registry: int  # registry entries without a queue
    schedules: int  # schedules restored
    oldest: int  # oldest entries fixed
    empty_streams: int  # empty streams dropped
    gone: tuple[str, ...]

    @classmethod
    def decode(cls, r: Reply) -> AuditReply:
        checked, orphans, schedules, oldest, empties = (int(v) for v in r[:5])
        return cls(checked, orphans, schedules, oldest, empties, tuple(text(n) for n in r[5:]))

    @property
    def repaired(self) -> bool:
        return bool(self.orphan_registry or self.schedules or self.oldest or self.empty_streams)


@dataclass(frozen=True, slots=True)
class SenderTotal:
    """One sender of senders_take.lua's reply: its tag and its total queued bytes in the
    shard (0: none left)."""

    tag: str
    total: int

    @classmethod
    def decode_all(cls, r: Reply) -> list[SenderTotal]:
        return [cls(text(r[i]), int(r[i + 1])) for i in range(0, len(r), 2)]


@dataclass(frozen=True, slots=True)
class SenderCount:
    """sender_count.lua: the sender's count (its queued bytes over every shard) after the
    copy and before it."""

    now: int
    before: int

    @classmethod
    def decode(cls, r: Reply) -> SenderCount:
        return cls(int(r[0]), int(r[1]))
