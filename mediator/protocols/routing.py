"""Routing 1.0 forward (RFC 0094): queue the inner envelope for every recipient we serve."""

from __future__ import annotations

import orjson

from mediator.didcomm.envelope import recipient_kids
from mediator.didcomm.keys import normalize_key
from mediator.errors import (
    EnvelopeError,
    InvalidKey,
    LimitExceeded,
    ProblemReport,
    ReplicationShortfall,
)
from mediator.protocols.context import Context

LIMIT_STATUS = {"message_size": 413, "count": 507, "size": 507, "will_queue": 403}


async def forward(ctx: Context) -> None:
    body = ctx.message.body
    raw_to = body.get("to")
    try:
        to = normalize_key(raw_to if isinstance(raw_to, str) else "")
    except InvalidKey as exc:
        raise ProblemReport("invalid-forward", f"forward.to: {exc}", status=400) from exc
    msg = body.get("msg")
    if isinstance(msg, str):
        envelope = msg.encode()
    elif isinstance(msg, dict):
        envelope = orjson.dumps(msg)
    else:
        raise ProblemReport("invalid-forward", "forward.msg must be an envelope", status=400)
    try:
        kids = recipient_kids(msg if isinstance(msg, dict) else envelope)
    except EnvelopeError as exc:
        raise ProblemReport("invalid-forward", f"forward.msg: {exc}", status=400) from exc

    # The message is queued once per connection among its recipients (Pickup 2.0,
    # "Multiple Recipients"); `to` itself must be one of ours.
    candidates = [to, *(k for k in kids if k != to)]
    owners = await ctx.services.store.owners(candidates)
    if owners[0] is None:
        raise ProblemReport(
            "unknown-recipient",
            f"no recipient is registered here for key {to}: the message was not accepted",
            status=404,
        )
    targets: dict[str, str] = {}
    for key, owner in zip(candidates, owners, strict=True):
        if owner is not None and owner not in targets:
            targets[owner] = key
    refused: list[LimitExceeded] = []
    unconfirmed: list[ReplicationShortfall] = []
    for connection, key in targets.items():
        try:
            await ctx.services.mailbox.enqueue(connection, envelope, key)
        except LimitExceeded as exc:
            refused.append(exc)
            continue
        except ReplicationShortfall as exc:  # stored all the same: the others still get it
            unconfirmed.append(exc)
        ctx.services.pusher.queued(connection)
    if unconfirmed and not refused:
        raise unconfirmed[0]
    if refused:
        first = refused[0]
        accepted = len(targets) - len(refused)
        note = f" ({accepted} of {len(targets)} recipients accepted it)" if accepted else ""
        raise ProblemReport(
            f"queue-{first.kind or 'limit'}".replace("_", "-"),
            f"the recipient's queue refused the message: {first.reason}{note}",
            status=LIMIT_STATUS.get(first.kind, 507),
        )


HANDLERS = {("routing", 1, "forward"): forward}
