"""DID Exchange 1.0 and 1.1 (RFC 0023), the mediator as responder.

The requester's DID may be did:peer:1 (with a signed `did_doc~attach`), did:peer:2, a long
did:peer:4, or an unqualified DID with a signed attached document. We answer with a whole
document (mediator_did.py): a did:peer:1 with its document attached to a did:peer:1, a
long-form did:peer:4 (no attachment: it carries its document) to a did:peer:2 or 4, else
our did:peer:2 with its document attached; each with HTTP and WebSocket services.
Attachments are signed by the invitation's key, and in 1.1 so is `did_rotate~attach`, which
carries our DID.
"""

from __future__ import annotations

import json
import logging

from mediator.didcomm.did_doc import PeerDoc
from mediator.didcomm.message import new_id
from mediator.didcomm.signatures import sign_attachment
from mediator.errors import DidError, ProblemReport
from mediator.protocols import handshake
from mediator.protocols.context import Context

log = logging.getLogger(__name__)


def _version(ctx: Context) -> str:
    return "1.0" if ctx.message.type.minor == 0 else "1.1"


async def request(ctx: Context) -> None:
    version = _version(ctx)
    body = ctx.message.body
    doc: PeerDoc | None = None
    try:
        invitation = await handshake.inviter(ctx)
        handshake.check_parent(ctx, invitation)
        doc = handshake.request_doc(body.get("did"), body.get("did_doc~attach"))
        made = await handshake.record(
            ctx, doc, invitation, f"didexchange/{version}", body.get("label")
        )
    except (ProblemReport, DidError) as exc:
        await handshake.refuse(ctx, doc, exc, version)
        return
    our_did, our_doc = ctx.services.did_for(made.verkey).for_request(body.get("did"), version)
    response = {
        "@type": ctx.message.type.reply("response", version=version),
        "@id": new_id(),
        "~thread": {"thid": ctx.message.thread.thid, "pthid": invitation.id},
        "did": our_did,
    }
    if our_doc is not None:
        response["did_doc~attach"] = {
            "@id": new_id(),
            "mime-type": "application/json",
            "data": sign_attachment(json.dumps(our_doc).encode(), invitation.keys),
        }
    if version == "1.1":
        response["did_rotate~attach"] = {
            "@id": new_id(),
            "mime-type": "text/string",
            "data": sign_attachment(our_did.encode(), invitation.keys),
        }
    await handshake.answer(ctx, made, response)


async def complete(ctx: Context) -> None:
    """The requester's last word: the connection is complete."""
    connection = ctx.require_connection()
    expected = await ctx.services.handshakes.thread_of(connection.verkey)
    if expected is not None and ctx.message.thread.thid != expected:
        raise ProblemReport(
            "complete_not_accepted", "this complete names another handshake's thread"
        )
    await ctx.services.handshakes.complete(connection.verkey)


async def problem_report(ctx: Context) -> None:
    """A requester abandoning the handshake: noted, nothing answered."""
    log.info("handshake problem report: %s", str(ctx.message.body.get("explain", ""))[:200])


HANDLERS = {
    ("didexchange", 1, "request"): request,
    ("didexchange", 1, "complete"): complete,
    ("didexchange", 1, "problem_report"): problem_report,
}
