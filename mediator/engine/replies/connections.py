"""Replies of the scripts about DIDComm connections and the clients behind them: their
records, routes, live-socket holds, push leases, phone notifications, thread orders and
abuse budgets."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from mediator.engine.replies.common import Reply, text


class ConnectionCreateCode(IntEnum):
    CREATED = 1
    KEY_TAKEN = 0


class ConnectionImportCode(IntEnum):
    """connection_import.lua."""

    IMPORTED = 1
    ALREADY = 0
    TAKEN = -1


class RouteAddCode(IntEnum):
    """route.lua `add`."""

    ADDED = 1
    ALREADY_OURS = 0
    TAKEN = -1


class HeldCode(IntEnum):
    """Compare-and-set on a key one owner holds: route.lua `release`, hold.lua `refresh`
    and `release`."""

    HELD = 1  # it was the caller's: released, or extended
    NOT_HELD = 0  # another's, or nobody's: left alone


class PushLeaseCode(IntEnum):
    """push_lease.lua, every op: whether the caller holds the lease afterwards."""

    HELD = 1
    NOT_HELD = 0


class NoteCode(IntEnum):
    """notify.lua, every op but `claim`, when its reply is not a time: why nothing was
    scheduled."""

    NOT_SCHEDULED = 0
    ALREADY_SCHEDULED = -1


def connection_created(r: Any) -> bool:
    """connection_create.lua: False when the key already belongs to a connection."""
    return ConnectionCreateCode(int(r)) is ConnectionCreateCode.CREATED


def connection_imported(r: Any) -> ConnectionImportCode:
    """connection_import.lua."""
    return ConnectionImportCode(int(r))


def route_added(r: Any) -> RouteAddCode:
    """route.lua `add`."""
    return RouteAddCode(int(r))


def held(r: Any) -> bool:
    """route.lua `release`, hold.lua `refresh` and `release`: whether the key was the
    caller's."""
    return HeldCode(int(r)) is HeldCode.HELD


def hold_previous(r: Any) -> str | None:
    """hold.lua `claim`: who held the key before the caller took it, if another did."""
    return text(r) or None


def push_lease_held(r: Any) -> bool:
    """push_lease.lua."""
    return PushLeaseCode(int(r)) is PushLeaseCode.HELD


@dataclass(frozen=True, slots=True)
class NoteReply:
    """notify.lua, every op but `claim`: `due_ms`, when the op (re)scheduled the
    notification (the caller tells the workers), else None with `code` saying why not."""

    due_ms: int | None = None
    code: NoteCode | None = None

    @classmethod
    def decode(cls, r: Any) -> NoteReply:
        value = int(r)
        if value > 0:
            return cls(due_ms=value)
        return cls(code=NoteCode(value))


@dataclass(frozen=True, slots=True)
class NoteClaim:
    """notify.lua `claim`: the connection's device and notification state, claimed for the
    guard time. `new`: a message came since the last claim, or that claim was never
    settled (its claimer died)."""

    now_ms: int
    service: str  # fcm or apns
    token: str  # '' when no device is registered
    platform: str
    app: str
    last_ms: int  # when last notified, 0: never
    attempts: int  # failed in a row
    new: bool
    notice_id: str  # kept across retries, '' for a first attempt

    @classmethod
    def decode(cls, r: Reply) -> NoteClaim | None:
        """None when there is nothing to run: not due (another worker ran it), or gone."""
        if not r:
            return None
        now, service, token, platform, app, last, attempts, new, notice_id = (text(v) for v in r)
        return cls(
            int(now), service, token, platform, app, int(last), int(attempts), new == "1", notice_id
        )


@dataclass(frozen=True, slots=True)
class ThreadOrders:
    """thread_order.lua: our sender_order for the reply on the thread (0 for the first), and
    the highest one the peer used."""

    ours: int
    highest: int

    @classmethod
    def decode(cls, r: Reply) -> ThreadOrders:
        return cls(int(r[0]), int(r[1]))


@dataclass(frozen=True, slots=True)
class BudgetReply:
    """rate.lua: whether the amount was taken from the window's budget; refused, how long
    until the window ends (nothing was taken)."""

    taken: bool
    wait_ms: int = 0

    @classmethod
    def decode(cls, r: Any) -> BudgetReply:
        wait_ms = int(r)
        return cls(taken=wait_ms <= 0, wait_ms=max(wait_ms, 0))
