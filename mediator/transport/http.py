"""DIDComm over HTTP: one message in, at most one message back (RFC 0092).

`POST /` is the hot path of every sender, so it is a bare ASGI middleware that answers before
Starlette's router and request objects; every other request passes through untouched.
"""

from __future__ import annotations

import logging

import orjson
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mediator.protocols.context import ForwardTally, Session
from mediator.transport.client_address import client_address
from mediator.transport.inbound import Pipeline, answers_at
from mediator.transport.outcome import Outgoing

log = logging.getLogger(__name__)

ENVELOPE_TYPES = ("application/didcomm-envelope-enc", "application/ssi-agent-wire")
# DIDComm v2's (Messaging 2.1 §IANA Media Types); its JSON serializations (no compact form).
V2_TYPES = (
    "application/didcomm-encrypted+json",
    "application/didcomm-signed+json",
    "application/didcomm-plain+json",
)
ACCEPTED_TYPES = (*ENVELOPE_TYPES, *V2_TYPES, "application/json", "")


class DidcommHttp:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["method"] != "POST"
            or (scope["path"] != "/" and not answers_at(scope))
        ):
            await self.app(scope, receive, send)
            return
        pipeline: Pipeline = scope["app"].state.didcomm
        limit = pipeline.services.didcomm.max_envelope_bytes
        media = ""
        for name, value in scope["headers"]:
            if name == b"content-type":
                media = value.decode("latin-1").split(";")[0].strip().lower()
        if media not in ACCEPTED_TYPES:
            wanted = " or ".join((*ENVELOPE_TYPES, *V2_TYPES))
            await _error(send, 415, "unsupported-media-type", f"send {wanted}")
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # nobody to answer; nothing was accepted
            body += message.get("body", b"")
            if len(body) > limit:
                await _error(send, 413, "too-large", f"over {limit} bytes")
                return
            if not message.get("more_body", False):
                break
        trusted = pipeline.services.limiter.trusted_proxies
        session = Session(client_address(scope.get("client"), scope["headers"], trusted))
        outcome = await pipeline.handle(bytes(body), session, capacity=1)
        if outcome.refusal is not None:
            r = outcome.refusal
            await _error(send, r.status, r.code, r.error, r.retry_after)
            return
        returned = outcome.returned
        if not returned and outcome.may_drain and outcome.connection is not None:
            returned = await _one_queued(pipeline, outcome.connection.verkey)
        for extra in returned[1:]:  # capacity 1: never more than one
            if extra.if_unsent is not None:
                await extra.if_unsent()
        if not returned:
            await _send(send, 202, b"", None, _forward_headers(outcome.forward))
            return
        if outcome.v2:  # a v2 answer is always encrypted (transport/inbound_v2.py)
            await _carry(send, returned[0], V2_TYPES[0])
            return
        await _carry(send, returned[0], media if media in ENVELOPE_TYPES else ENVELOPE_TYPES[0])


def _forward_headers(tally: ForwardTally | None) -> list[tuple[bytes, bytes]]:
    """A forward's answer says for how many connections it was queued, and how many held
    the same envelope already (a sender forwarding it once per recipient key)."""
    if tally is None:
        return []
    return [
        (b"x-mediator-queued", str(tally.queued).encode()),
        (b"x-mediator-duplicates", str(tally.duplicates).encode()),
    ]


async def _send(
    send: Send,
    status: int,
    body: bytes,
    media: str | None,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-length", str(len(body)).encode()), *(extra or ())]
    if media is not None:
        headers.append((b"content-type", media.encode()))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _error(
    send: Send, status: int, code: str, text: str, retry_after: int | None = None
) -> None:
    body: dict[str, object] = {"error": text, "code": code}
    extra = []
    if retry_after is not None:
        body["retry_after"] = retry_after
        extra.append((b"retry-after", str(retry_after).encode()))
    await _send(send, status, orjson.dumps(body), "application/json", extra)


async def _carry(send: Send, out: Outgoing, media: str) -> None:
    """Answer with a message: its after-sent step runs only once the body is out, its
    if-unsent step when the write fails."""
    try:
        await _send(send, 200, out.payload, media)
    except BaseException:
        if out.if_unsent is not None:
            await out.if_unsent()
        raise
    if out.after_sent is not None:
        await out.after_sent()


async def _one_queued(pipeline: Pipeline, connection: str) -> list[Outgoing]:
    """Implicit pickup over HTTP: one queued message per response, deleted once sent."""
    mailbox = pipeline.services.mailbox
    messages = (await mailbox.deliver(connection, 1)).messages
    if not messages:
        return []
    ids = [messages[0].message_id]

    async def delete() -> None:
        await mailbox.acknowledge(connection, ids)

    async def offer_again() -> None:
        await mailbox.release(connection, ids)

    return [Outgoing(messages[0].body, after_sent=delete, if_unsent=offer_again)]


async def post_only(request: Request) -> Response:
    """Never reached for POST (DidcommHttp answers first); the route makes other methods 405."""
    return Response(status_code=405)
