"""Helpers shared by the pickup and queue protocols."""

from __future__ import annotations

import base64
from dataclasses import replace
from datetime import UTC, datetime
from typing import Protocol

from redis.exceptions import OutOfMemoryError

from mediator.didcomm.keys import normalize_key
from mediator.errors import InvalidKey, ProblemReport
from mediator.mediation.store import Connection
from mediator.protocols.context import Callback, Services, Session

MAX_ACK_IDS = 1000


async def live_mode(session: Session, services: Services, connection: str) -> bool:
    """A status's `live_delivery`: live mode on this transport, or, asked over HTTP, on a
    socket of any node holding the connection (the wallet's socket is live even though
    this request is not; over a socket, that socket's own mode is the answer)."""
    if session.is_live(connection):
        return True
    if session.persistent:
        return False
    return await services.presence.holder(connection) is not None


def timestamp(ms: int | None) -> str | None:
    """Times as the pickup and queue documents write them: `2019-05-01 12:00:00Z`."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode()


class PickupContext(Protocol):
    """What the helpers need of a handler's context, v1's (Context) or v2's (ContextV2)."""

    services: Services
    session: Session
    connection: Connection | None

    def require_mediation(self) -> Connection: ...


async def explicit_pickup(ctx: PickupContext) -> Connection:
    """The connection, granted; and remember it fetches explicitly, so that its
    return_route messages never start an implicit drain."""
    connection = ctx.require_mediation()
    ctx.session.explicit_pickup = True
    if not connection.explicit_pickup:
        try:
            await ctx.services.store.mark_explicit_pickup(connection.verkey)
        except OutOfMemoryError:  # Redis is full: the pickup, which frees room, goes on
            return connection  # (this socket knows; the record learns on a later pickup)
        connection = ctx.connection = replace(connection, explicit_pickup=True)
    return connection


async def owned_key(ctx: PickupContext, connection: Connection, value: object) -> str | None:
    """A `recipient_key` field: None when absent, else one of this connection's keys."""
    if value is None:
        return None
    try:
        key = normalize_key(value if isinstance(value, str) else "")
    except InvalidKey as exc:
        raise ProblemReport("invalid-recipient-key", f"recipient_key: {exc}") from exc
    if await ctx.services.store.owner(key) != connection.verkey:
        raise ProblemReport(
            "unknown-recipient-key", "recipient_key is not registered by this connection"
        )
    return key


def handed_out(ctx: PickupContext, connection: str, message_ids: list[str]) -> Callback | None:
    """Note deliveries on the session (offered again if it closes unacknowledged) and give
    the step that offers them again at once if the reply carrying them is never sent."""
    if not message_ids:
        return None
    ctx.session.offered(connection, message_ids)
    mailbox = ctx.services.mailbox

    async def offer_again() -> None:
        await mailbox.release(connection, message_ids)

    return offer_again


def whole_number(value: object, name: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ProblemReport("invalid-request", f"{name} must be a whole number >= {minimum}")
    return value


def id_list(value: object, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(i, str) for i in value):
        raise ProblemReport("invalid-request", f"{name} must be a list of message ids")
    if len(value) > MAX_ACK_IDS:
        raise ProblemReport("invalid-request", f"{name} holds more than {MAX_ACK_IDS} ids")
    return list(value)
