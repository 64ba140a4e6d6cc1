"""The protocol families the mediator speaks, one module each, and the dispatch table.

A handler gets a `Context`, validates the message's fields, calls the mailbox or the
mediation store, and adds its replies; it never talks to Redis itself.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from mediator.didcomm.message import MessageType
from mediator.errors import ProblemReport
from mediator.protocols import (
    connections,
    coordinate_mediation,
    didexchange,
    discover_features,
    out_of_band,
    pickup_v1,
    pickup_v2,
    push_notifications,
    queue_v1,
    routing,
    trust_ping,
)
from mediator.protocols.context import Context

log = logging.getLogger(__name__)

Handler = Callable[[Context], Awaitable[None]]

HANDLERS: dict[tuple[str, int, str], Handler] = {
    **didexchange.HANDLERS,
    **connections.HANDLERS,
    **coordinate_mediation.HANDLERS,
    **routing.HANDLERS,
    **pickup_v2.HANDLERS,
    **pickup_v1.HANDLERS,
    **queue_v1.HANDLERS,
    **trust_ping.HANDLERS,
    **discover_features.HANDLERS,
    **push_notifications.HANDLERS,
    **out_of_band.HANDLERS,
}

# Messages handled without a connection: anoncrypted, authcrypted by a key that has none yet
# (handshake requests), or, when allowed, plaintext.
ANONYMOUS = {
    ("routing", 1, "forward"),
    ("trust_ping", 1, "ping"),
    ("noop", 1, "noop"),
    ("didexchange", 1, "request"),
    ("didexchange", 1, "problem_report"),
    ("connections", 1, "request"),
    ("connections", 1, "problem_report"),
}


def handler_for(mtype: MessageType) -> Handler:
    """Any minor version of a major version we implement is accepted (RFC 0003)."""
    key = (mtype.family, mtype.major, mtype.name)
    if mtype.family == "noop" or (mtype.name == "noop" and key not in HANDLERS):
        return trust_ping.noop  # RFC 0092 leaves noop's family open
    if mtype.name in PROBLEM_NAMES and key not in HANDLERS:
        return problem_noted  # never a problem report in answer to one (RFC 0035)
    handler = HANDLERS.get(key)
    if handler is None:
        raise ProblemReport("unsupported-message-type", f"unsupported message type {mtype}")
    return handler


PROBLEM_NAMES = ("problem-report", "problem_report")


async def problem_noted(ctx: Context) -> None:
    """A peer's problem report in any family (`notification/1.0`, a protocol's own): logged,
    never answered, so that two agents never trade reports about each other's reports."""
    description = ctx.message.body.get("description")
    code = description.get("code") if isinstance(description, dict) else None
    log.info("problem report from a peer: %s %s", ctx.message.type, str(code)[:100])


def is_anonymous(mtype: MessageType) -> bool:
    if mtype.name == "noop":
        return True
    return (mtype.family, mtype.major, mtype.name) in ANONYMOUS
