"""Routing 1.0 forward (RFC 0094): queue the inner envelope for every recipient we serve."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence

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
from mediator.mediation.keymaps import is_verkey
from mediator.mediation.mailbox import Forwarded
from mediator.protocols.context import Context, ForwardTally, Services

UNKNOWN_KEY_FIRST_PAUSE = 0.01
DIGEST_BYTES = 16  # BLAKE2b: collisions would take 2**64 envelopes
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

    # The inner envelope's kids are as its sender wrote them: one that is no base58 verkey
    # is nobody's here.
    others = [k for k in kids if k != to and is_verkey(k)]
    sender = ctx.message.sender_verkey or ctx.session.address
    await queue_forwarded(ctx.services, ctx.forward, [to], envelope, others, sender, f"key {to}")


async def queue_forwarded(
    services: Services,
    tally: ForwardTally,
    to: Sequence[str],
    envelope: bytes,
    others: Sequence[str],
    sender: str,
    named: str,
) -> None:
    """Queue `envelope` for the connection that registered the first key of `to` that
    anybody registered (a v2 key stands for more than one), and once more for each other
    connection among `others` (Pickup 2.0, "Multiple Recipients"); `sender` is whom its
    bytes count for, `named` how the recipient was named (for the refusal). ProblemReport
    (404) when nobody registered `to`, (413/507/403) when a queue refused it."""
    refused: list[LimitExceeded] = []
    unconfirmed: list[ReplicationShortfall] = []
    targets: set[str] = set()

    async def queued(forwarded: Forwarded) -> None:
        targets.add(forwarded.connection)
        if forwarded.duplicate:  # its connection holds these bytes already: nothing new
            tally.duplicates += 1
            return
        tally.queued += 1
        if forwarded.has_push is not False:  # False: its record names no push endpoint
            services.pusher.queued(forwarded.connection)
        if forwarded.notified:  # scheduled by the forward's own script
            services.notifier.count("scheduled")
        elif forwarded.has_device is None:  # not looked at (Redis Cluster, other recipients)
            await services.notifier.queued(forwarded.connection)

    # A sender with several of our recipients' keys may forward the same envelope once per
    # key: each connection stores it once (and the answer says which were duplicates).
    digest = hashlib.blake2b(envelope, digest_size=DIGEST_BYTES).digest()
    tag = await services.limiter.forwarded(sender, len(envelope))
    try:
        first = await _forward_when_routed(services, to, envelope, digest, tag)
    except (LimitExceeded, ReplicationShortfall) as exc:
        owners = [o for o in await services.store.owners(list(to)) if o]
        owner = owners[0] if owners else ""
        targets.add(owner)
        if isinstance(exc, LimitExceeded):
            refused.append(exc)
        else:  # stored all the same: the others still get it
            unconfirmed.append(exc)
            services.pusher.queued(owner)
            await services.notifier.queued(owner)
    else:
        if first is None:
            raise ProblemReport(
                "unknown-recipient",
                f"no recipient is registered here for {named}: the message was not accepted",
                status=404,
            )
        await queued(first)
    for key, other in zip(others, await services.store.owners(list(others)), strict=True):
        if other is None or other in targets:
            continue
        owner = other
        targets.add(owner)
        try:
            forwarded = await services.mailbox.enqueue_forwarded(owner, envelope, key, digest, tag)
        except LimitExceeded as exc:
            refused.append(exc)
            continue
        except ReplicationShortfall as exc:
            unconfirmed.append(exc)
            continue
        await queued(forwarded)
    if unconfirmed and not refused:
        raise unconfirmed[0]
    if refused:
        refusal = refused[0]
        accepted = len(targets) - len(refused)
        note = f" ({accepted} of {len(targets)} recipients accepted it)" if accepted else ""
        raise ProblemReport(
            f"queue-{refusal.kind or 'limit'}".replace("_", "-"),
            f"the recipient's queue refused the message: {refusal.reason}{note}",
            status=LIMIT_STATUS.get(refusal.kind, 507),
        )


async def _forward_when_routed(
    services: Services, to: Sequence[str], envelope: bytes, digest: bytes, sender: str
) -> Forwarded | None:
    """Queue the message for the connection of the first key of `to` somebody registered;
    keys nobody registered yet are looked up again for up to
    --forward-unknown-key-wait-seconds (10 ms, then doubling), because agents hand out
    invitations before their keylist update has reached us (ACA-Py: 0.4 to 18 ms later,
    measured; docs/interop.md)."""
    notify_ms = services.notifier.delay_ms

    async def attempt() -> Forwarded | None:
        for key in to:
            forwarded = await services.mailbox.forward(
                key, envelope, services.store, digest=digest, sender=sender, notify_ms=notify_ms
            )
            if forwarded is not None:
                return forwarded
        return None

    forwarded = await attempt()
    waited, pause = 0.0, UNKNOWN_KEY_FIRST_PAUSE
    budget = services.didcomm.forward_unknown_key_wait_seconds
    while forwarded is None and waited < budget:
        pause = min(pause, budget - waited)
        await asyncio.sleep(pause)
        waited += pause
        pause *= 2
        forwarded = await attempt()
    return forwarded


HANDLERS = {("routing", 1, "forward"): forward}
