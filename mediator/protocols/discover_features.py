"""Discover Features 1.0 (RFC 0031): which protocols this mediator speaks, and in which role.
Credo picks its pickup strategy from the answer."""

from __future__ import annotations

import fnmatch

from mediator.didcomm.message import PREFIXES
from mediator.errors import ProblemReport
from mediator.notify.provider import SERVICES
from mediator.protocols.context import Context

MAX_QUERY = 500

# The protocols the dispatch table implements, with our role in each.
PROTOCOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("didexchange/1.1", ("responder",)),
    ("didexchange/1.0", ("responder",)),
    ("connections/1.0", ("inviter",)),
    ("coordinate-mediation/1.0", ("mediator",)),
    ("routing/1.0", ("mediator",)),
    ("messagepickup/2.0", ("mediator",)),
    ("messagepickup/1.0", ("mediator",)),
    ("queue/1.0", ("mediator",)),
    ("trust_ping/1.0", ("receiver",)),
    ("discover-features/1.0", ("responder",)),
    ("out-of-band/1.1", ("sender",)),
)
# Offered only when this deployment can reach the service's devices (mediator/notify).
PUSH_PROTOCOLS = {
    service: (f"push-notifications-{service}/1.0", ("notification-sender",)) for service in SERVICES
}


async def query(ctx: Context) -> None:
    ctx.require_connection()
    pattern = ctx.message.body.get("query")
    if not isinstance(pattern, str) or not pattern or len(pattern) > MAX_QUERY:
        raise ProblemReport("invalid-query", f"query must be 1 to {MAX_QUERY} characters")
    # Answer in the prefix the query names; a bare "*" gets the prefix of the message.
    prefix = ctx.message.type.prefix
    for known in PREFIXES:
        if pattern.startswith(known):
            prefix = known
    apps = ctx.services.notifier.apps
    offered = [*PROTOCOLS, *(p for s, p in PUSH_PROTOCOLS.items() if apps.serves(s))]
    disclosed = [
        {"pid": prefix + pid, "roles": list(roles)}
        for pid, roles in offered
        if fnmatch.fnmatchcase(prefix + pid, pattern)
    ]
    ctx.reply("disclose", {"protocols": disclosed})


HANDLERS = {("discover-features", 1, "query"): query}
