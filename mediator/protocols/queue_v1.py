"""Queue Management 1.0 (draft): status, limit updates and fetch.

The draft leaves deletion open. A fetched message is handed out like a Pickup 2.0
delivery: hidden for the delivery deadline, offered again after it, and deleted only when
acknowledged — by the ids in the next fetch-request's `message_id_list` (our extension) or
by a Pickup 2.0 `messages-received`. So a lost batch never loses a message.
"""

from __future__ import annotations

from typing import Any

from mediator.errors import ProblemReport
from mediator.protocols.context import Context
from mediator.protocols.pickup_common import (
    explicit_pickup,
    handed_out,
    id_list,
    timestamp,
    whole_number,
)
from mediator.protocols.pickup_v1 import attached

FAMILY = "queue"


async def _status_reply(ctx: Context, connection: str) -> None:
    mailbox = ctx.services.mailbox
    status = await mailbox.status(connection)
    limits = await mailbox.limits(connection)
    last = status.last_delivered_ms
    body: dict[str, Any] = {
        "message_count": status.stored,
        "will_queue": limits.will_queue,
        "duration_limit": limits.duration_limit,
        "duration_waited": 0 if last is None else max(0, status.now_ms - last) // 1000,
        "last_added_time": timestamp(status.last_added_ms),
        "last_delivered_time": timestamp(status.last_delivered_ms),
        "last_removed_time": timestamp(status.last_removed_ms),
        "message_count_limit": limits.message_count_limit,
        "message_size_limit": limits.message_size_limit,
        "size": status.bytes,
        "size_limit": limits.size_limit,
    }
    ctx.reply("status", {"status": body}, queueable=False, queued_count=status.waiting)


async def status_request(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    await _status_reply(ctx, connection.verkey)


async def status_update_request(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    update = ctx.message.body.get("update")
    if not isinstance(update, dict):
        raise ProblemReport("invalid-update", "update must be an object")
    mailbox = ctx.services.mailbox
    limits = (await mailbox.limits(connection.verkey)).updated(update, ctx.services.queue)
    await mailbox.set_limits(connection.verkey, limits)
    await _status_reply(ctx, connection.verkey)


async def fetch_request(ctx: Context) -> None:
    connection = await explicit_pickup(ctx)
    ctx.require_return_route()
    body = ctx.message.body
    limit = ctx.didcomm.max_delivery_limit
    if body.get("message_count_limit") is not None:
        asked = whole_number(body["message_count_limit"], "message_count_limit", minimum=1)
        limit = min(limit, asked)
    mailbox = ctx.services.mailbox
    if body.get("message_id_list") is not None:
        acked = id_list(body["message_id_list"], "message_id_list")
        await mailbox.acknowledge(connection.verkey, acked)
        ctx.session.acknowledged(connection.verkey, acked)
    messages = (await mailbox.deliver(connection.verkey, limit)).messages
    unsent = handed_out(ctx, connection.verkey, [m.message_id for m in messages])
    ctx.reply(
        "batch",
        {
            "message_count": len(messages),
            "messages": [
                {"id": m.message_id, "msg": attached(m), "added_time": timestamp(m.published_ms)}
                for m in messages
            ],
        },
        queueable=False,
        if_unsent=unsent,
    )


HANDLERS = {
    (FAMILY, 1, "status-request"): status_request,
    (FAMILY, 1, "status-update-request"): status_update_request,
    (FAMILY, 1, "fetch-request"): fetch_request,
}
