"""Pickup 1.0 (RFC 0212), the batch pickup older wallets fall back to.

It has no acknowledgement, so a batch's messages are deleted once the batch has been
written to the transport (the HTTP response sent, the WebSocket frame sent); when the write
fails they are offered again.
"""

from __future__ import annotations

from typing import Any

import orjson

from mediator.engine.model import ReceivedMessage
from mediator.protocols.context import Context
from mediator.protocols.pickup_common import explicit_pickup, timestamp, whole_number

FAMILY = "messagepickup"


def attached(message: ReceivedMessage) -> Any:
    """A queued envelope as a JSON value, or as text when it is not JSON that the reply's
    writer (orjson) can carry: it nests at most 255 deep and refuses integers over 64 bits."""
    try:
        value = orjson.loads(message.body)
        orjson.dumps(value)
    except (ValueError, TypeError, RecursionError):
        return message.body.decode("utf-8", "replace")
    return value


async def batch_pickup(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    ctx.require_return_route()
    size = whole_number(ctx.message.body.get("batch_size"), "batch_size", minimum=1)
    size = min(size, ctx.didcomm.max_delivery_limit)
    messages = (await ctx.services.mailbox.deliver(connection.verkey, size)).messages
    ids = [m.message_id for m in messages]
    mailbox = ctx.services.mailbox

    async def delete() -> None:
        await mailbox.acknowledge(connection.verkey, ids)

    async def offer_again() -> None:
        await mailbox.release(connection.verkey, ids)

    ctx.reply(
        "batch",
        {"messages~attach": [{"id": m.message_id, "message": attached(m)} for m in messages]},
        queueable=False,
        after_sent=delete if ids else None,
        if_unsent=offer_again if ids else None,
    )


async def status_request(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    status = await ctx.services.mailbox.status(connection.verkey)
    last = status.last_delivered_ms
    ctx.reply(
        "status",
        {
            "message_count": status.waiting,
            "duration_waited": 0 if last is None else max(0, status.now_ms - last) // 1000,
            "last_added_time": timestamp(status.last_added_ms),
            "last_delivered_time": timestamp(status.last_delivered_ms),
            "last_removed_time": timestamp(status.last_removed_ms),
            "total_size": status.bytes,
        },
        queueable=False,
        queued_count=status.waiting,
    )


async def noop(ctx: Context) -> None:
    """Nothing to answer: the transport may return a queued message (implicit pickup)."""


HANDLERS = {
    (FAMILY, 1, "batch-pickup"): batch_pickup,
    (FAMILY, 1, "status-request"): status_request,
    (FAMILY, 1, "status_request"): status_request,  # RFC 0212's text; wallets send the other
    (FAMILY, 1, "noop"): noop,
}
