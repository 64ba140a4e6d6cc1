"""DIDComm over HTTP: one message in, at most one message back (RFC 0092)."""

from __future__ import annotations

import logging

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.types import Receive, Scope, Send

from mediator.protocols.context import Session
from mediator.transport.inbound import Outgoing, Pipeline

log = logging.getLogger(__name__)

ENVELOPE_TYPES = ("application/didcomm-envelope-enc", "application/ssi-agent-wire")
ACCEPTED_TYPES = (*ENVELOPE_TYPES, "application/json", "")


class CarryingResponse(Response):
    """A response carrying a message: runs its after-sent step only once the body is out,
    and its if-unsent step when the write fails."""

    def __init__(self, out: Outgoing, media_type: str) -> None:
        super().__init__(out.payload, media_type=media_type)
        self.out = out

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        except BaseException:
            if self.out.if_unsent is not None:
                await self.out.if_unsent()
            raise
        if self.out.after_sent is not None:
            await self.out.after_sent()


def _error(status: int, code: str, text: str) -> Response:
    return JSONResponse({"error": text, "code": code}, status_code=status)


async def didcomm_post(request: Request) -> Response:
    pipeline: Pipeline = request.app.state.didcomm
    settings = pipeline.services.settings
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in ACCEPTED_TYPES:
        return _error(415, "unsupported-media-type", f"send {' or '.join(ENVELOPE_TYPES)}")
    body = bytearray()
    try:
        async for chunk in request.stream():
            body += chunk
            if len(body) > settings.max_envelope_bytes:
                return _error(413, "too-large", f"over {settings.max_envelope_bytes} bytes")
    except ClientDisconnect:
        return Response(status_code=400)
    session = Session()
    outcome = await pipeline.handle(bytes(body), session, capacity=1)
    if outcome.refusal is not None:
        r = outcome.refusal
        return _error(r.status, r.code, r.error)
    returned = outcome.returned
    if not returned and outcome.may_drain and not session.explicit_pickup:
        returned = await _one_queued(pipeline, outcome.connection.verkey)  # type: ignore[union-attr]
    if not returned:
        return Response(status_code=202)
    for extra in returned[1:]:  # capacity 1: never more than one
        if extra.if_unsent is not None:
            await extra.if_unsent()
    reply_type = media if media in ENVELOPE_TYPES else ENVELOPE_TYPES[0]
    return CarryingResponse(returned[0], reply_type)


async def _one_queued(pipeline: Pipeline, connection: str) -> list[Outgoing]:
    """Implicit pickup over HTTP: one queued message per response, deleted once sent."""
    mailbox = pipeline.services.mailbox
    messages, _, _ = await mailbox.deliver(connection, 1)
    if not messages:
        return []
    ids = [messages[0].message_id]

    async def delete() -> None:
        await mailbox.acknowledge(connection, ids)

    async def offer_again() -> None:
        await mailbox.release(connection, ids)

    return [Outgoing(messages[0].body, after_sent=delete, if_unsent=offer_again)]
