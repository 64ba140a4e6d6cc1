"""Connections 1.0 (RFC 0160), the mediator as responder: the request carries the
requester's DID and DID document inline; the response carries ours in `connection~sig`,
signed by the invitation's key. The connection completes with the requester's first
authcrypted message (usually a trust ping)."""

from __future__ import annotations

import logging
from typing import Any

from mediator.didcomm.did_doc import PeerDoc
from mediator.didcomm.message import new_id
from mediator.didcomm.signatures import sign_connection
from mediator.errors import DidError, ProblemReport
from mediator.protocols import handshake
from mediator.protocols.context import Context

log = logging.getLogger(__name__)


async def request(ctx: Context) -> None:
    body = ctx.message.body
    connection: Any = body.get("connection")
    doc: PeerDoc | None = None
    try:
        invitation = await handshake.inviter(ctx)
        handshake.check_parent(ctx, invitation)
        if not isinstance(connection, dict):
            raise DidError("the request needs a connection object with DID and DIDDoc")
        doc = handshake.request_doc(connection.get("DID"), None, inline=connection.get("DIDDoc"))
        made = await handshake.record(ctx, doc, invitation, "connections/1.0", body.get("label"))
    except (ProblemReport, DidError) as exc:
        await handshake.refuse(ctx, doc, exc, "1.0")
        return
    ours = ctx.services.did_for(made.verkey)
    signed = {"DID": ours.unqualified, "DIDDoc": ours.legacy_doc}
    response = {
        "@type": ctx.message.type.reply("response"),
        "@id": new_id(),
        "~thread": {"thid": ctx.message.thread.thid},
        "connection~sig": sign_connection(signed, invitation.keys),
    }
    await handshake.answer(ctx, made, response)


async def problem_report(ctx: Context) -> None:
    log.info("connections problem report: %s", str(ctx.message.body.get("explain", ""))[:200])


HANDLERS = {
    ("connections", 1, "request"): request,
    ("connections", 1, "problem_report"): problem_report,
}
