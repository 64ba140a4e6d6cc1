"""The protocol families the mediator speaks, one module each, and the dispatch table.

A handler gets a `Context`, validates the message's fields, calls the mailbox or the
mediation store, and adds its replies; it never talks to Redis itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from mediator.didcomm.message import MessageType
from mediator.errors import ProblemReport
from mediator.protocols import (
    coordinate_mediation,
    pickup_v1,
    pickup_v2,
    queue_v1,
    routing,
    trust_ping,
)
from mediator.protocols.context import Context

Handler = Callable[[Context], Awaitable[None]]

HANDLERS: dict[tuple[str, int, str], Handler] = {
    **coordinate_mediation.HANDLERS,
    **routing.HANDLERS,
    **pickup_v2.HANDLERS,
    **pickup_v1.HANDLERS,
    **queue_v1.HANDLERS,
    **trust_ping.HANDLERS,
}

# Message families and the highest minor version we implement of each major version.
SUPPORTED: dict[tuple[str, int], int] = {
    ("coordinate-mediation", 1): 0,
    ("routing", 1): 0,
    ("messagepickup", 2): 0,
    ("messagepickup", 1): 0,
    ("queue", 1): 0,
    ("trust_ping", 1): 0,
    ("noop", 1): 0,
}

# Messages handled without a connection (anoncrypt or, when allowed, plaintext).
ANONYMOUS = {("routing", 1, "forward"), ("trust_ping", 1, "ping"), ("noop", 1, "noop")}


def handler_for(mtype: MessageType) -> Handler:
    """Any minor version of a major version we implement is accepted (RFC 0003)."""
    if (mtype.name == "noop" and (mtype.family, mtype.major) not in SUPPORTED) or (
        mtype.family == "noop"
    ):
        return trust_ping.noop  # RFC 0092 leaves noop's family open
    handler = HANDLERS.get((mtype.family, mtype.major, mtype.name))
    if handler is None:
        raise ProblemReport("unsupported-message-type", f"unsupported message type {mtype}")
    return handler


def is_anonymous(mtype: MessageType) -> bool:
    if mtype.name == "noop":
        return True
    return (mtype.family, mtype.major, mtype.name) in ANONYMOUS
