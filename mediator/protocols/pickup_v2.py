"""Pickup 2.0 (RFC 0685): status, delivery, messages-received and live mode."""

from __future__ import annotations

from typing import Any

from mediator.errors import ProblemReport
from mediator.mediation.mailbox import MailboxStatus
from mediator.protocols.context import Context, Reply
from mediator.protocols.pickup_common import (
    b64,
    explicit_pickup,
    handed_out,
    id_list,
    live_mode,
    owned_key,
    timestamp,
    whole_number,
)

FAMILY = "messagepickup"


def status_body(
    status: MailboxStatus, *, live: bool, recipient_key: str | None, raw_key: object
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "message_count": status.waiting,
        "longest_waited_seconds": status.longest_waited_seconds,
        "total_bytes": status.bytes,
        "live_delivery": live,
    }
    if status.oldest_ms is not None:
        body["oldest_received_time"] = timestamp(status.oldest_ms)
    if status.newest_ms is not None:
        body["newest_received_time"] = timestamp(status.newest_ms)
    if recipient_key is not None:
        body["recipient_key"] = raw_key  # the matching value, as the recipient wrote it
    return body


async def _status_reply(
    ctx: Context,
    connection: str,
    recipient_key: str | None = None,
    raw_key: object = None,
    status: MailboxStatus | None = None,
) -> Reply:
    if status is None:
        status = await ctx.services.mailbox.status(connection, recipient_key)
    ctx.session.pickup_seen(connection, status.now_ms)
    body = status_body(
        status,
        live=await live_mode(ctx.session, ctx.services, connection),
        recipient_key=recipient_key,
        raw_key=raw_key,
    )
    # A status describes the queue at this instant: it is never queued (Pickup 2.0).
    return ctx.reply("status", body, queueable=False, queued_count=status.waiting)


async def status_request(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    raw = ctx.message.body.get("recipient_key")
    key = await owned_key(ctx, connection, raw)
    await _status_reply(ctx, connection.verkey, key, raw)


async def delivery_request(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    ctx.require_return_route()
    limit = whole_number(ctx.message.body.get("limit"), "limit", minimum=1)
    raw = ctx.message.body.get("recipient_key")
    key = await owned_key(ctx, connection, raw)
    limit = min(limit, ctx.didcomm.max_delivery_limit)
    mailbox = ctx.services.mailbox
    status: MailboxStatus | None = None
    orders: tuple[int, int] | None = None
    if key is None:
        # The answer's queued count and thread orders come in the receive's round trip.
        thread = ctx.services.threads.order(connection.verkey, ctx.message)
        got, status, orders = await mailbox.deliver_with_status(connection.verkey, limit, thread)
    else:
        got = await mailbox.deliver(connection.verkey, limit, recipient_key=key)
    messages, now_ms = got.messages, got.now_ms
    ctx.session.pickup_seen(connection.verkey, now_ms)
    if not messages:
        reply = await _status_reply(ctx, connection.verkey, key, raw, status)
    else:
        ids = [m.message_id for m in messages]
        body: dict[str, Any] = {
            "~attach": [{"@id": m.message_id, "data": {"base64": b64(m.body)}} for m in messages]
        }
        if key is not None:
            body["recipient_key"] = raw
        unsent = handed_out(ctx, connection.verkey, ids)
        queued = None if status is None else status.waiting
        reply = ctx.reply("delivery", body, queueable=False, if_unsent=unsent, queued_count=queued)
    if orders is not None:
        reply.message["~thread"] = ctx.services.threads.thread(
            connection.verkey, ctx.message, *orders
        )


async def messages_received(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    ids = id_list(ctx.message.body.get("message_id_list"), "message_id_list")
    # The status answering it (a SHOULD, never queued) is counted on its thread in the
    # same call that deletes: one round trip for the whole answer.
    thread = ctx.services.threads.order(connection.verkey, ctx.message) if ctx.can_return else None
    _, status, orders = await ctx.services.mailbox.acknowledge_with_status(
        connection.verkey, ids, thread
    )
    ctx.session.acknowledged(connection.verkey, ids)
    if orders is not None:
        reply = await _status_reply(ctx, connection.verkey, status=status)
        reply.message["~thread"] = ctx.services.threads.thread(
            connection.verkey, ctx.message, *orders
        )


async def live_delivery_change(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    live = ctx.message.body.get("live_delivery")
    if not isinstance(live, bool):
        raise ProblemReport("invalid-request", "live_delivery must be true or false")
    if live and not ctx.session.persistent:
        raise ProblemReport(
            "live-delivery-not-supported", "Connection does not support Live Delivery"
        )
    if not live:
        await ctx.session.stop_live(connection.verkey)
        await _status_reply(ctx, connection.verkey)
        return
    status = await ctx.services.mailbox.status(connection.verkey)
    session = ctx.session
    # Messages already queued are not pushed ("they must still be requested"): live mode
    # delivers what arrives from now on, or since the pickup round this socket began with
    # (so nothing that arrived during the round waits), starting once the status is sent.
    since = session.live_since(connection.verkey, status.now_ms)

    async def go_live() -> None:
        await session.start_live(connection.verkey, since, ctx.services.key_on(connection))

    ctx.reply(
        "status",
        status_body(status, live=True, recipient_key=None, raw_key=None),
        queueable=False,
        after_sent=go_live,
        queued_count=status.waiting,
    )


HANDLERS = {
    (FAMILY, 2, "status-request"): status_request,
    (FAMILY, 2, "delivery-request"): delivery_request,
    (FAMILY, 2, "messages-received"): messages_received,
    (FAMILY, 2, "live-delivery-change"): live_delivery_change,
}
