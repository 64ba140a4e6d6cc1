"""Trust Ping 1.0 (RFC 0048) and the return-route `noop` (RFC 0092)."""

from __future__ import annotations

from mediator.protocols.context import Context


async def ping(ctx: Context) -> None:
    if ctx.message.body.get("response_requested", True) is not False:
        ctx.reply("ping_response", {})


async def noop(ctx: Context) -> None:
    """Only opens a return route: the transport may hand back a queued message."""


HANDLERS = {("trust_ping", 1, "ping"): ping}
