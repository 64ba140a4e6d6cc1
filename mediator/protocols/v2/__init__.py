"""The DIDComm v2 protocols the mediator speaks, one module each, and their dispatch table.
Handlers get a `ContextV2` and use the same services as the v1 ones (mediator/protocols)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from mediator.didcomm.message import MessageType
from mediator.errors import ProblemReport
from mediator.protocols.v2 import basic, coordinate_mediation, pickup, routing
from mediator.protocols.v2.context import ContextV2

log = logging.getLogger(__name__)

HandlerV2 = Callable[[ContextV2], Awaitable[None]]

HANDLERS: dict[tuple[str, int, str], HandlerV2] = {
    **coordinate_mediation.HANDLERS,
    **routing.HANDLERS,
    **pickup.HANDLERS,
    **basic.HANDLERS,
}

# Messages handled without a sender: a forward is anoncrypted by design; a ping only gets
# no answer.
ANONYMOUS = {("routing", 2, "forward"), ("trust-ping", 2, "ping")}


def handler_for(mtype: MessageType) -> HandlerV2:
    """Any minor version of a major version we implement is accepted."""
    key = (mtype.family, mtype.major, mtype.name)
    handler = HANDLERS.get(key)
    if handler is not None:
        return handler
    if mtype.name == "problem-report":
        return problem_noted  # never a problem report in answer to one
    if mtype.family == "empty":
        return empty
    raise ProblemReport("unsupported-message-type", f"unsupported message type {mtype}")


async def problem_noted(ctx: ContextV2) -> None:
    """A peer's problem report: logged, never answered."""
    code = ctx.message.body.get("code")
    log.info("problem report from a v2 peer: %s %s", ctx.message.type, str(code)[:100])


async def empty(ctx: ContextV2) -> None:
    """`https://didcomm.org/empty/1.0/empty`: opens a return route, asks nothing."""


def is_anonymous(mtype: MessageType) -> bool:
    return (mtype.family, mtype.major, mtype.name) in ANONYMOUS or mtype.family == "empty"
