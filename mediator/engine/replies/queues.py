"""Replies of the scripts that create, change, describe and look after one queue."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mediator.engine.model import QueueStats, TagStats
from mediator.engine.replies.common import Reply, optional_ms, text


class Found(IntEnum):
    """queue_stats, tag_stats, queue_limits, upkeep."""

    OK = 1
    NO_QUEUE = -1


class QueueCreateCode(IntEnum):
    CREATED = 1
    EXISTS = 0


class QueueUpdateCode(IntEnum):
    UPDATED = 1
    NO_QUEUE = 0


class QueueDeleteCode(IntEnum):
    DELETED = 1
    NO_QUEUE = 0
    IN_USE = 2


class AdoptCode(IntEnum):
    """adopt.lua (mediator migrate)."""

    COUNTED = 1
    COUNTED_BEFORE = 0


def queue_created(r: Any) -> bool:
    """queue_create.lua."""
    return QueueCreateCode(int(r)) is QueueCreateCode.CREATED


def adopted(r: Any) -> AdoptCode:
    """adopt.lua."""
    return AdoptCode(int(r))


@dataclass(frozen=True, slots=True)
class QueueUpdateReply:
    """queue_update.lua."""

    code: QueueUpdateCode
    previous_dead_letter_queue: str = ""  # qualified, '' for none
    hint: int = -1  # the shard's new earliest due time, or -1

    @classmethod
    def decode(cls, r: Reply) -> QueueUpdateReply:
        code = QueueUpdateCode(int(r[0]))
        if code is QueueUpdateCode.NO_QUEUE:
            return cls(code)
        return cls(code, text(r[1]), int(r[2]))


@dataclass(frozen=True, slots=True)
class QueueDeleteReply:
    """queue_delete.lua."""

    code: QueueDeleteCode
    dead_letter_queue: str = ""  # DELETED: the queue's own, qualified ('' for none)
    hint: int = -1
    users: tuple[str, ...] = ()  # IN_USE: the queues (qualified) naming it their dead letter queue

    @classmethod
    def decode(cls, r: Reply) -> QueueDeleteReply:
        code = QueueDeleteCode(int(r[0]))
        if code is QueueDeleteCode.DELETED:
            return cls(code, text(r[1]), int(r[2]))
        if code is QueueDeleteCode.IN_USE:
            return cls(code, users=tuple(text(u) for u in r[1:]))
        return cls(code)


def queue_stats(r: Reply) -> QueueStats | None:
    """queue_stats.lua (also the middle of acknowledge.lua's): None when there is no queue."""
    if Found(int(r[0])) is Found.NO_QUEUE:
        return None
    return QueueStats(
        now_ms=int(r[1]),
        stored=int(r[2]),
        in_flight=int(r[3]),
        delayed=int(r[4]),
        oldest_ms=optional_ms(r[5]),
        bytes=int(r[6]),
        sched_ms=optional_ms(r[7]),
        last_added_ms=optional_ms(r[8]),
        last_delivered_ms=optional_ms(r[9]),
        last_removed_ms=optional_ms(r[10]),
        newest_ms=optional_ms(r[11]),
    )


def tag_stats(r: Reply) -> TagStats | None:
    """tag_stats.lua: None when there is no queue."""
    if Found(int(r[0])) is Found.NO_QUEUE:
        return None
    return TagStats(
        now_ms=int(r[1]),
        messages=int(r[2]),
        visible=int(r[3]),
        bytes=int(r[4]),
        oldest_ms=optional_ms(r[5]),
        newest_ms=optional_ms(r[6]),
        complete=bool(int(r[7])),
    )


def queue_limits_hint(r: Reply) -> int | None:
    """queue_limits.lua: the shard's new earliest due time (-1: none), None when there is
    no queue."""
    if Found(int(r[0])) is Found.NO_QUEUE:
        return None
    return int(r[1])


@dataclass(frozen=True, slots=True)
class UpkeepReply:
    """upkeep.lua: the outbox entries (packed) it found abandoned, for a hand-over."""

    code: Found
    abandoned: tuple[bytes, ...] = ()

    @classmethod
    def decode(cls, r: Reply) -> UpkeepReply:
        code = Found(int(r[0]))
        if code is Found.NO_QUEUE:
            return cls(code)
        return cls(code, tuple(bytes(p) for p in r[5:]))
