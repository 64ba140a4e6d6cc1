"""Coordinate Mediation 2.0 (mediate-request, keylist-update, keylist-query) and 3.0
(Veramo's: the same with recipient-update and recipient-query), for DIDComm v2 wallets.

A grant names the mediator's DID as `routing_did`: one string in 2.0 (Identus reads it so),
a list in 3.0 (Veramo reads `routing_did[0]` in both, so 2.0's string would give it one
character: 2.0 answers Veramo's 2.0 requests with a string all the same, as the spec says,
and Veramo speaks 3.0 when it can). Registrations share the v1 routing table
(mediator/mediation/wallets_v2.py).
"""

from __future__ import annotations

from typing import Any

from mediator.didcomm.keys import verkey_to_did_key
from mediator.errors import ProblemReport
from mediator.mediation import wallets_v2
from mediator.mediation.record import DENIED, GRANTED
from mediator.protocols.coordinate_mediation import MAX_UPDATES, allowed, page_asked
from mediator.protocols.v2.context import ContextV2

FAMILY = "coordinate-mediation"


def mediator_did(ctx: ContextV2) -> str:
    return ctx.services.v2.did


async def mediate_request(ctx: ContextV2) -> None:
    connection = ctx.require_sender()
    services = ctx.services
    now = await services.mailbox.now_ms()
    if not allowed(ctx.services.didcomm, connection.verkey, ctx.message.sender):
        if connection.handshake is not None:  # a record exists: it says denied
            await services.store.set_state(connection.verkey, DENIED, now)
        ctx.reply("mediate-deny", {})
        return
    # Kept first: a record with a queue in it must never expire with the queue still counted.
    if await services.store.made_by_handshake(connection.verkey):
        # A v1 connection's record (the dual-stack wallet): kept as a v1 grant keeps it.
        await services.handshakes.keep(connection.verkey, services.key_on(connection).verkey_b58)
    else:
        await services.store.open_v2(connection.verkey)
    await services.mailbox.open(connection.verkey)
    await services.store.set_state(connection.verkey, GRANTED, now)
    did = mediator_did(ctx)
    ctx.reply("mediate-grant", {"routing_did": [did] if ctx.message.type.major >= 3 else did})


async def keylist_update(ctx: ContextV2) -> None:
    connection = ctx.require_mediation()
    updates = ctx.message.body.get("updates")
    if not isinstance(updates, list) or not updates:
        raise ProblemReport("invalid-keylist-update", "updates must be a non-empty list")
    if len(updates) > MAX_UPDATES:
        raise ProblemReport("invalid-keylist-update", f"at most {MAX_UPDATES} updates at once")
    store = ctx.services.store
    results: list[dict[str, Any]] = []
    for update in updates:
        name = update.get("recipient_did") if isinstance(update, dict) else None
        action = update.get("action") if isinstance(update, dict) else None
        result = "client_error"
        if isinstance(name, str) and 0 < len(name) <= 4096 and action == "add":
            result = await wallets_v2.register(store, connection.verkey, name)
        elif isinstance(name, str) and 0 < len(name) <= 4096 and action == "remove":
            result = await wallets_v2.unregister(store, connection.verkey, name)
        results.append({"recipient_did": name, "action": action, "result": result})
    name = "recipient-update-response" if ctx.message.type.major >= 3 else "keylist-update-response"
    ctx.reply(name, {"updated": results})


async def keylist_query(ctx: ContextV2) -> None:
    connection = ctx.require_mediation()
    offset, limit = page_asked(ctx.message.body)
    # What each key was registered as; a v1 registration of the same wallet as its did:key.
    names = list(
        dict.fromkeys(
            name or verkey_to_did_key(key)
            for key, name in await ctx.services.store.names(connection.verkey)
        )
    )
    page = names[offset : offset + limit] if limit else []
    pagination = {
        "count": len(page),
        "offset": offset,
        "remaining": max(0, len(names) - offset - len(page)),
    }
    entries = [{"recipient_did": n} for n in page]
    if ctx.message.type.major >= 3:
        ctx.reply("recipient", {"dids": entries, "pagination": pagination})
    else:
        ctx.reply("keylist", {"keys": entries, "pagination": pagination})


HANDLERS = {
    (FAMILY, 2, "mediate-request"): mediate_request,
    (FAMILY, 2, "keylist-update"): keylist_update,
    (FAMILY, 2, "keylist-query"): keylist_query,
    (FAMILY, 3, "mediate-request"): mediate_request,
    (FAMILY, 3, "recipient-update"): keylist_update,
    (FAMILY, 3, "recipient-query"): keylist_query,
}
