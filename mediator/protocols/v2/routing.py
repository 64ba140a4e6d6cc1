"""Routing 2.0 `forward` for DIDComm v2 senders: each attached message is queued for the
wallet that registered `next` (a DID, a DID URL, or a did:key), in the same queues as v1
forwards, with the same limits, duplicate suppression and abuse limits. An expired forward
(`expires_time` passed) is refused, not queued.
"""

from __future__ import annotations

import time

from mediator.didcomm.v2 import forward as forward_v2
from mediator.errors import DidError, ProblemReport
from mediator.mediation import wallets_v2
from mediator.protocols.routing import queue_forwarded
from mediator.protocols.v2.context import ContextV2


async def forward(ctx: ContextV2) -> None:
    read = forward_v2.read(ctx.message.raw)
    if read.expired(time.time()):
        raise ProblemReport(
            "expired", "the forward's expires_time has passed: not queued", status=400
        )
    try:
        keys = wallets_v2.route_keys(read.next)
    except DidError as exc:
        raise ProblemReport("invalid-request", f"next: {exc}", status=400) from exc
    sender = ctx.message.sender or ctx.session.address
    for payload in read.payloads:
        await queue_forwarded(ctx.services, ctx.forward, keys, payload, (), sender, read.next[:80])


HANDLERS = {("routing", 2, "forward"): forward}
