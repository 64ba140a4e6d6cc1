"""Replies of the scripts that store, forward, hand out, acknowledge and dead-letter
messages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mediator.engine.model import QueueStats, ReceivedMessage
from mediator.engine.replies.common import Reply, optional_ms, text
from mediator.engine.replies.queues import queue_stats


class SendCode(IntEnum):
    """send.lua, and the send part of forward.lua's reply."""

    STORED = 1
    NO_QUEUE = -1
    MESSAGE_TOO_LARGE = -2
    COUNT_LIMIT = -3
    SIZE_LIMIT = -4
    REFUSED = -5
    RATE_LIMITED = -6


class ForwardCode(IntEnum):
    ROUTED = 1
    NO_ROUTE = 0


class ReceiveCode(IntEnum):
    """receive, receive_filtered, peek, reclaim_inflight."""

    OK = 1
    NO_QUEUE = -1
    HOLD_LOST = -2


class DeleteCode(IntEnum):
    DELETED = 1
    NOT_HERE = 0
    MOVED = 2


class AcceptCode(IntEnum):
    ACCEPTED = 1
    ALREADY_HERE = 0
    NO_QUEUE = -1


class SettleCode(IntEnum):
    SETTLED = 1
    ALREADY_SETTLED = 2
    DELETED = 0


@dataclass(frozen=True, slots=True)
class SendReply:
    """send.lua (and the tail of forward.lua's reply). Besides the code, each error names
    what it is about: MESSAGE_TOO_LARGE `message` (1-based) and its `size`, COUNT_LIMIT the
    messages `held`, SIZE_LIMIT the bytes `held`, RATE_LIMITED `wait_ms`."""

    code: SendCode
    now_ms: int = 0
    hint: int = -1
    visible: int = 0
    delayed: int = 0
    copies: tuple[str, ...] = ()  # per message: '' stored, else the queued message it repeats
    message: int = 0
    size: int = 0
    held: int = 0
    wait_ms: int = 0

    @classmethod
    def decode(cls, r: Reply) -> SendReply:
        code = SendCode(int(r[0]))
        if code is SendCode.STORED:
            copies = tuple(text(c) for c in r[5:])
            return cls(code, int(r[1]), int(r[2]), int(r[3]), int(r[4]), copies)
        if code is SendCode.MESSAGE_TOO_LARGE:
            return cls(code, message=int(r[1]), size=int(r[2]))
        if code in (SendCode.COUNT_LIMIT, SendCode.SIZE_LIMIT):
            return cls(code, held=int(r[1]))
        if code is SendCode.RATE_LIMITED:
            return cls(code, wait_ms=int(r[1]))
        return cls(code)


@dataclass(frozen=True, slots=True)
class ForwardReply:
    """forward.lua, asked about `reported` config fields: the queue's name (within its
    namespace), which of those fields its config has, whether a phone notification was
    scheduled, and the send's reply; `send` is None when no route names the key."""

    code: ForwardCode
    name: str = ""
    present: tuple[bool, ...] = ()
    notified: bool = False
    send: SendReply | None = None

    @classmethod
    def decode(cls, r: Reply, reported: int) -> ForwardReply:
        code = ForwardCode(int(r[0]))
        if code is ForwardCode.NO_ROUTE:
            return cls(code)
        bits = int(r[2])
        present = tuple(bool(bits >> i & 1) for i in range(reported))
        return cls(code, text(r[1]), present, bool(bits >> reported & 1), SendReply.decode(r[3:]))


MESSAGE_VALUES = 9  # values per handed-out message in a receive reply (_lib.lua put_message)


def received_message(f: Sequence[Any]) -> ReceivedMessage:
    """One message of a receive reply (its first 8 values; the 9th is its dead letter queue)."""
    return ReceivedMessage(
        message_id=text(f[0]),
        body=bytes(f[1]),
        content_type=text(f[2]),
        content_encoding=text(f[3]),
        trace_id=text(f[4]),
        published_ms=int(f[5]),
        receives=int(f[6]),
        visible_at_ms=int(f[7]),
    )


@dataclass(frozen=True, slots=True)
class Handout:
    """receive.lua, receive_filtered.lua, peek.lua and reclaim_inflight.lua: the messages
    handed out (or shown), `more` when the script stopped at its budget, the earliest
    delayed or in-flight deadline when nothing came back (`next_due_ms`), and in slot 6
    either the shard's new earliest due time (`hint`: receive) or where a filtered receive
    stopped (`cursor`)."""

    code: ReceiveCode
    now_ms: int = 0
    next_due_ms: int | None = None
    more: bool = False
    hint: int = -1
    cursor: str = ""
    messages: tuple[ReceivedMessage, ...] = ()
    dead_lettered: tuple[str, ...] = ()  # ids this call moved to their dead letter queue
    handed: int | None = None  # receive_filtered's hand-offs so far, when asked for

    @classmethod
    def decode(cls, r: Reply) -> Handout:
        """receive, peek, reclaim_inflight."""
        return cls._decode(r, filtered=False)

    @classmethod
    def decode_filtered(cls, r: Reply) -> Handout:
        """receive_filtered."""
        return cls._decode(r, filtered=True)

    @classmethod
    def _decode(cls, r: Reply, *, filtered: bool) -> Handout:
        code = ReceiveCode(int(r[0]))
        if code is not ReceiveCode.OK:
            return cls(code)
        count = int(r[3])
        rows = [r[6 + MESSAGE_VALUES * i : 6 + MESSAGE_VALUES * (i + 1)] for i in range(count)]
        tail = 6 + MESSAGE_VALUES * count
        return cls(
            code,
            now_ms=int(r[1]),
            next_due_ms=optional_ms(r[2]),
            more=bool(int(r[4])),
            hint=-1 if filtered else int(r[5]),
            cursor=text(r[5]) if filtered else "",
            messages=tuple(received_message(f) for f in rows),
            dead_lettered=tuple(text(f[0]) for f in rows if f[8]),
            handed=int(r[tail]) if filtered and len(r) > tail else None,
        )


@dataclass(frozen=True, slots=True)
class AcknowledgeReply:
    """acknowledge.lua: `stats` None when there is no queue; `orders` (ours, the highest the
    peer used) when a thread was given."""

    deleted: int
    orders: tuple[int, int] | None
    stats: QueueStats | None
    hint: int

    @classmethod
    def decode(cls, r: Reply) -> AcknowledgeReply:
        stats = queue_stats(r[3:15])
        orders = None if int(r[1]) < 0 else (int(r[1]), int(r[2]))
        return cls(int(r[0]), orders, stats, -1 if stats is None else int(r[15]))


@dataclass(frozen=True, slots=True)
class DeleteReply:
    """delete_message.lua."""

    code: DeleteCode
    hint: int = -1
    dead_letter_queue: str = ""  # MOVED: where it was on its way to (qualified)

    @classmethod
    def decode(cls, r: Reply) -> DeleteReply:
        code = DeleteCode(int(r[0]))
        if code is DeleteCode.DELETED:
            return cls(code, hint=int(r[1]))
        if code is DeleteCode.MOVED:
            return cls(code, dead_letter_queue=text(r[1]))
        return cls(code)


@dataclass(frozen=True, slots=True)
class AcceptReply:
    """dead_letter_accept.lua."""

    code: AcceptCode
    hint: int = -1
    retention_ms: int = 0  # the dead letter queue's

    @classmethod
    def decode(cls, r: Reply) -> AcceptReply:
        code = AcceptCode(int(r[0]))
        if code is AcceptCode.NO_QUEUE:
            return cls(code)
        return cls(code, int(r[1]), int(r[2]))


@dataclass(frozen=True, slots=True)
class SettleReply:
    """dead_letter_settle.lua."""

    code: SettleCode
    hint: int

    @classmethod
    def decode(cls, r: Reply) -> SettleReply:
        return cls(SettleCode(int(r[0])), int(r[1]))
