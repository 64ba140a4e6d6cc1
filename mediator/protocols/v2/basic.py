"""Trust Ping 2.0 and Discover Features 2.0 for DIDComm v2 peers."""

from __future__ import annotations

import fnmatch
from typing import Any

from mediator.errors import ProblemReport
from mediator.protocols.v2.context import DIDCOMM_ORG, ContextV2

MAX_QUERIES = 20
MAX_MATCH = 500

# The v2 protocols the dispatch table implements, with our role in each.
PROTOCOLS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("coordinate-mediation/2.0", ("mediator",)),
    ("coordinate-mediation/3.0", ("mediator",)),
    ("routing/2.0", ("mediator",)),
    ("messagepickup/3.0", ("mediator",)),
    ("message-pickup/4.0", ("mediator",)),
    ("trust-ping/2.0", ("receiver",)),
    ("discover-features/2.0", ("responder",)),
)


async def ping(ctx: ContextV2) -> None:
    """Answered when asked (the default); an anonymous ping has nobody to answer."""
    if ctx.message.body.get("response_requested", True) is not False and ctx.message.sender:
        ctx.reply("ping-response", {})


async def queries(ctx: ContextV2) -> None:
    ctx.require_sender()
    asked = ctx.message.body.get("queries")
    if not isinstance(asked, list) or not asked or len(asked) > MAX_QUERIES:
        raise ProblemReport("invalid-query", f"queries is a list of 1 to {MAX_QUERIES}")
    disclosures: list[dict[str, Any]] = []
    for query in asked:
        match = query.get("match") if isinstance(query, dict) else None
        if not isinstance(match, str) or not match or len(match) > MAX_MATCH:
            raise ProblemReport("invalid-query", "each query has a match of 1 to 500 characters")
        if query.get("feature-type") != "protocol":
            continue  # we disclose protocols only (no goal codes, no headers)
        for pid, roles in PROTOCOLS:
            uri = DIDCOMM_ORG + pid
            if fnmatch.fnmatchcase(uri, match) and all(d["id"] != uri for d in disclosures):
                disclosures.append({"feature-type": "protocol", "id": uri, "roles": list(roles)})
    ctx.reply("disclose", {"disclosures": disclosures})


HANDLERS = {
    ("trust-ping", 2, "ping"): ping,
    ("discover-features", 2, "queries"): queries,
}
