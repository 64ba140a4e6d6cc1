"""Pickup 3.0 (`messagepickup/3.0`) and 4.0 (`message-pickup/4.0`) for DIDComm v2 wallets,
on the same mailboxes as Pickup 2.0: whatever was forwarded to the wallet's keys, v1
envelopes and v2 messages alike, is delivered as an attachment (its JSON as `data.json`).

3.0 answers an empty delivery-request with a status and writes times in seconds; 4.0 with
an empty delivery, times in milliseconds, and no longest_waited_seconds. In live mode (a
WebSocket only) both deliver in `delivery` messages that wait for messages-received, as 4.0
requires and 3.0 allows: a live message never leaves the queue unacknowledged. 3.0's live
mode also delivers what was queued before it (4.0's leaves that to delivery-requests).
"""

from __future__ import annotations

import base64
import uuid
from typing import Any

import orjson

from mediator.didcomm.v2 import problem as problems
from mediator.engine.model import ReceivedMessage
from mediator.errors import DidError, ProblemReport
from mediator.mediation import wallets_v2
from mediator.mediation.mailbox import MailboxStatus
from mediator.mediation.store import Connection
from mediator.protocols.context import DeliveryWriter
from mediator.protocols.pickup_common import (
    explicit_pickup,
    handed_out,
    id_list,
    live_mode,
    whole_number,
)
from mediator.protocols.v2.context import DIDCOMM_ORG, ContextV2, ReplyV2


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _v4(ctx: ContextV2) -> bool:
    return ctx.message.type.major >= 4


def status_body(status: MailboxStatus, *, v4: bool, live: bool) -> dict[str, Any]:
    scale = 1 if v4 else 1000  # 4.0 writes milliseconds, 3.0 seconds
    body: dict[str, Any] = {
        "message_count": status.waiting,
        "total_bytes": status.bytes,
        "live_delivery": live,
    }
    if not v4:
        body["longest_waited_seconds"] = status.longest_waited_seconds
    if status.oldest_ms is not None:
        body["oldest_received_time"] = status.oldest_ms // scale
    if status.newest_ms is not None:
        body["newest_received_time"] = status.newest_ms // scale
    return body


async def _recipient(ctx: ContextV2, connection: Connection) -> str | None:
    """A `recipient_did` field: None when absent, else the key of it this wallet holds."""
    value = ctx.message.body.get("recipient_did")
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ProblemReport("invalid-recipient-key", "recipient_did must be a DID")
    try:
        key = await wallets_v2.owned_key(ctx.services.store, connection.verkey, value)
    except DidError as exc:
        raise ProblemReport("invalid-recipient-key", f"recipient_did: {exc}") from exc
    if key is None:
        raise ProblemReport(
            "unknown-recipient-key", "recipient_did is not registered by this wallet"
        )
    return key


async def _status(
    ctx: ContextV2, connection: str, key: str | None, status: MailboxStatus | None = None
) -> ReplyV2:
    if status is None:
        status = await ctx.services.mailbox.status(connection, key)
    ctx.session.pickup_seen(connection, status.now_ms)
    live = await live_mode(ctx.session, ctx.services, connection)
    body = status_body(status, v4=_v4(ctx), live=live)
    if key is not None:
        body["recipient_did"] = ctx.message.body.get("recipient_did")
    # A status describes the queue at this instant: it is never queued.
    return ctx.reply("status", body, queueable=False)


async def status_request(ctx: ContextV2) -> None:
    connection = await explicit_pickup(ctx)
    await _status(ctx, connection.verkey, await _recipient(ctx, connection))


def attachments(messages: list[ReceivedMessage]) -> list[dict[str, Any]]:
    """Each message as `data.json` (Veramo reads nothing else; Identus reads either), or
    as `data.base64` when its bytes are no JSON object, or one with a number JSON would not
    write back the same (an integer past 64 bits reads as a float): never changed."""
    out = []
    for m in messages:
        try:
            value = orjson.loads(m.body)
        except orjson.JSONDecodeError:
            value = None
        exact = isinstance(value, dict) and not _has_float(value)
        data = {"json": value} if exact else {"base64": b64url(m.body)}
        out.append({"id": m.message_id, "data": data})
    return out


def _has_float(value: Any, depth: int = 0) -> bool:
    """Whether a float is anywhere in `value` (a JWE has none: its fields are strings)."""
    if isinstance(value, float) or depth > 64:
        return True
    if isinstance(value, dict):
        return any(_has_float(v, depth + 1) for v in value.values())
    if isinstance(value, list):
        return any(_has_float(v, depth + 1) for v in value)
    return False


async def delivery_request(ctx: ContextV2) -> None:
    connection = await explicit_pickup(ctx)
    if not ctx.message.wants_return():
        raise ProblemReport(
            "return-route-required",
            'a delivery-request is answered over its own transport: set return_route "all"',
        )
    field = "message_count_limit" if _v4(ctx) else "limit"
    limit = whole_number(ctx.message.body.get(field), field, minimum=1)
    key = await _recipient(ctx, connection)
    limit = min(limit, ctx.services.didcomm.max_delivery_limit)
    got = await ctx.services.mailbox.deliver(connection.verkey, limit, recipient_key=key)
    ctx.session.pickup_seen(connection.verkey, got.now_ms)
    if not got.messages and not _v4(ctx):
        await _status(ctx, connection.verkey, key)
        return
    body: dict[str, Any] = {}
    if key is not None:
        body["recipient_did"] = ctx.message.body.get("recipient_did")
    ids = [m.message_id for m in got.messages]
    unsent = handed_out(ctx, connection.verkey, ids)
    reply = ctx.reply("delivery", body, queueable=False, if_unsent=unsent)
    reply.message["attachments"] = attachments(got.messages)


async def messages_received(ctx: ContextV2) -> None:
    connection = await explicit_pickup(ctx)
    ids = id_list(ctx.message.body.get("message_id_list"), "message_id_list")
    _, status, _ = await ctx.services.mailbox.acknowledge_with_status(connection.verkey, ids)
    ctx.session.acknowledged(connection.verkey, ids)
    if ctx.message.wants_return():  # the status it SHOULD get, where it can go back
        await _status(ctx, connection.verkey, None, status)


def delivery_writer(ctx: ContextV2) -> DeliveryWriter:
    """What the socket's live loop sends for a batch: a `delivery` in the protocol and
    version that turned live mode on, packed for the wallet's DID."""
    mtype = ctx.message.type
    kind = f"{DIDCOMM_ORG}{mtype.family}/{mtype.major}.{mtype.minor}/delivery"
    pack = ctx.pack

    def write(messages: list[ReceivedMessage]) -> bytes:
        delivery = {
            "id": str(uuid.uuid4()),
            "type": kind,
            "body": {},
            "attachments": attachments(messages),
        }
        return pack(delivery)

    return write


async def live_delivery_change(ctx: ContextV2) -> None:
    connection = await explicit_pickup(ctx)
    live = ctx.message.body.get("live_delivery")
    if not isinstance(live, bool):
        raise ProblemReport("invalid-request", "live_delivery must be true or false")
    if live and not ctx.session.persistent:
        type_ = f"{DIDCOMM_ORG}message-pickup/4.0/problem-report" if _v4(ctx) else problems.TYPE
        report = problems.problem_report(
            problems.LIVE_MODE_NOT_SUPPORTED, ctx.message.raw, type_=type_
        )
        ctx.replies.append(ReplyV2(report, queueable=False))
        return
    session = ctx.session
    if not live:
        await session.stop_live(connection.verkey)
        await _status(ctx, connection.verkey, None)
        return
    status = await ctx.services.mailbox.status(connection.verkey)
    # 4.0 as Pickup 2.0's live mode (mediator/protocols/pickup_v2.py): what arrives from
    # now on, or since this socket's first pickup answer ("messages already in the queue
    # MUST still be requested"). 3.0 delivers what is queued too: Identus, its wallet,
    # turns live mode on and never asks for the queue, which would otherwise wait forever.
    since = session.live_since(connection.verkey, status.now_ms) if _v4(ctx) else 0
    writer = delivery_writer(ctx)

    async def go_live() -> None:
        await session.start_live(connection.verkey, since, writer=writer)

    reply = await _status(ctx, connection.verkey, None, status)
    reply.message["body"]["live_delivery"] = True
    reply.after_sent = go_live


HANDLERS = {
    (family, major, name): handler
    for family, major in (("messagepickup", 3), ("message-pickup", 4))
    for name, handler in (
        ("status-request", status_request),
        ("delivery-request", delivery_request),
        ("messages-received", messages_received),
        ("live-delivery-change", live_delivery_change),
    )
}
