"""Coordinate Mediation 1.0 (RFC 0211): mediate-request, keylist-update, keylist-query."""

from __future__ import annotations

from typing import Any

from mediator.didcomm.keys import normalize_key, verkey_to_did_key
from mediator.errors import InvalidKey, ProblemReport
from mediator.mediation.store import DENIED, GRANTED, Connection
from mediator.protocols.context import Context
from mediator.settings import DidcommSettings

FAMILY = "coordinate-mediation"
MAX_UPDATES = 1000
PAGE_DEFAULT = 100
PAGE_MAX = 1000


def allowed(settings: DidcommSettings, connection: str, did: str | None = None) -> bool:
    """Whether mediation is open to everyone, or the allowlist names this connection's key
    (or a v2 wallet's `did`)."""
    if settings.mediation_open:
        return True
    allowlist = set()
    for item in settings.mediation_allowlist.split(","):
        item = item.strip()
        if item and did is not None and item == did:
            return True
        if item:
            try:
                allowlist.add(normalize_key(item))
            except InvalidKey:
                continue
    return connection in allowlist


async def mediate_request(ctx: Context) -> None:
    connection = ctx.require_connection()
    now = await ctx.services.mailbox.now_ms()
    if not allowed(ctx.didcomm, connection.verkey):
        await ctx.services.store.set_state(connection.verkey, DENIED, now)
        ctx.reply("mediate-deny", {})
        return
    # Kept first: a record with a queue in it must never expire with the queue still counted.
    ours = ctx.services.key_on(connection).verkey_b58
    await ctx.services.handshakes.keep(connection.verkey, ours)
    await ctx.services.mailbox.open(connection.verkey)
    await ctx.services.store.set_state(connection.verkey, GRANTED, now)
    ctx.reply(
        "mediate-grant",
        {
            "endpoint": ctx.services.endpoints[0],
            "routing_keys": [_routing_key(ctx, connection)],
        },
    )


def _routing_key(ctx: Context, connection: Connection) -> str:
    """Ours; for a connection imported from another mediator, that mediator's (its wallet
    already gave it to its contacts)."""
    imported = ctx.services.imported.routing_keys
    if connection.ours is not None and imported:
        return imported[0].did_key
    return ctx.services.identity.did_key


async def keylist_update(ctx: Context) -> None:
    connection = ctx.require_mediation()
    updates = ctx.message.body.get("updates")
    if not isinstance(updates, list) or not updates:
        raise ProblemReport("invalid-keylist-update", "updates must be a non-empty list")
    if len(updates) > MAX_UPDATES:
        raise ProblemReport("invalid-keylist-update", f"at most {MAX_UPDATES} updates at once")
    results: list[dict[str, Any]] = []
    for update in updates:
        key = update.get("recipient_key") if isinstance(update, dict) else None
        action = update.get("action") if isinstance(update, dict) else None
        result = "client_error"
        if isinstance(key, str) and action in ("add", "remove"):
            try:
                verkey = normalize_key(key)
            except InvalidKey:
                verkey = None
            if verkey is not None and action == "add":
                result = await ctx.services.store.add_key(connection.verkey, verkey)
            elif verkey is not None:
                result = await ctx.services.store.remove_key(connection.verkey, verkey)
        results.append({"recipient_key": key, "action": action, "result": result})
    ctx.reply("keylist-update-response", {"updated": results})


def page_asked(body: dict[str, Any]) -> tuple[int, int]:
    """(offset, limit) of a keylist query's `paginate` (v1's and v2's alike): limit at most
    PAGE_MAX; ProblemReport for a value that is no whole number >= 0."""
    paginate = body.get("paginate") or {}
    if not isinstance(paginate, dict):
        raise ProblemReport("invalid-keylist-query", "paginate must be an object")
    limit = paginate.get("limit", PAGE_DEFAULT)
    offset = paginate.get("offset", 0)
    for name, value in (("limit", limit), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ProblemReport("invalid-keylist-query", f"paginate.{name} must be >= 0")
    return offset, min(limit, PAGE_MAX)


async def keylist_query(ctx: Context) -> None:
    connection = ctx.require_mediation()
    offset, limit = page_asked(ctx.message.body)
    base58 = connection.keylist_base58  # imported from a mediator that answered so
    page, total = await ctx.services.store.keylist(connection.verkey, offset, limit)
    ctx.reply(
        "keylist",
        {
            "keys": [{"recipient_key": k if base58 else verkey_to_did_key(k)} for k in page],
            "pagination": {
                "count": len(page),
                "offset": offset,
                "remaining": max(0, total - offset - len(page)),
            },
        },
    )


HANDLERS = {
    (FAMILY, 1, "mediate-request"): mediate_request,
    (FAMILY, 1, "keylist-update"): keylist_update,
    (FAMILY, 1, "keylist-query"): keylist_query,
}
