"""What connections 1.0 and DID Exchange share on the responder's side: which invitation a
request answers, the requester's DID document, recording the connection, and answering
(encrypted to the new connection, by return route or through its queue to its endpoint).

A request changes nothing until every check has passed: the invitation is ours (and, when
single-use, still open), the DID document resolves and its signature verifies, the sender
(when authcrypted) holds a key of that document, and no connection has the key yet.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from mediator.didcomm import did_peer
from mediator.didcomm.did_doc import PeerDoc, parse_doc
from mediator.didcomm.invitation import multi_use_id
from mediator.didcomm.keys import KeyPair
from mediator.didcomm.message import new_id
from mediator.didcomm.signatures import verify_attachment
from mediator.errors import DidError, ProblemReport
from mediator.mediation.handshakes import Handshake
from mediator.protocols.context import Context, Reply

log = logging.getLogger(__name__)

NOT_ACCEPTED = "request_not_accepted"


@dataclass(frozen=True)
class Inviter:
    """The invitation a request answers: the key it was encrypted to, and the id."""

    keys: KeyPair
    id: str
    single_use: bool


def handshake_problem(ctx: Context, code: str, explain: str, version: str) -> dict[str, Any]:
    """A problem_report in the handshake's own family (RFC 0023/0160), which requesters
    read to abandon the handshake; it also carries RFC 0035's `description`."""
    thread = ctx.message.thread
    report: dict[str, Any] = {
        "@type": ctx.message.type.reply("problem_report", version=version),
        "@id": new_id(),
        "~thread": {"thid": thread.thid, **({"pthid": thread.pthid} if thread.pthid else {})},
        "problem-code": code,
        "explain": explain,
        "description": {"en": explain, "code": code},
    }
    return report


async def inviter(ctx: Context) -> Inviter:
    """The invitation behind the envelope's recipient key; refused when it is not one."""
    key = ctx.message.recipient_verkey
    services = ctx.services
    if key is None:
        raise ProblemReport(NOT_ACCEPTED, "a request must be encrypted to the invitation's key")
    if key == services.identity.verkey_b58 and services.didcomm.invitation_multi_use:
        return Inviter(services.identity, multi_use_id(services.identity), single_use=False)
    imported = services.imported.invitation(key)
    if imported is not None:  # the old mediator's: every wallet app that ships it connects
        return Inviter(imported.keys, imported.id, single_use=False)
    found = (await services.handshakes.invitations([key])).get(key)
    if found is None:
        raise ProblemReport(NOT_ACCEPTED, "this invitation is not open (used or expired)")
    return Inviter(found.keys, found.id, single_use=True)


def check_parent(ctx: Context, invitation: Inviter) -> None:
    pthid = ctx.message.thread.pthid
    if pthid is not None and pthid != invitation.id:
        raise ProblemReport(
            NOT_ACCEPTED, f"~thread.pthid {pthid[:80]!r} names no invitation of this mediator"
        )


def request_doc(did: Any, attach: Any, *, inline: Any = None) -> PeerDoc:
    """The requester's DID document: from a did:peer:2 or long did:peer:4 itself, or else
    from the attachment (did:peer:1, short did:peer:4, unqualified DIDs), which must be
    signed by a key of the document, or from `inline` (connections 1.0's DIDDoc, which the
    request's own envelope vouches for)."""
    if not isinstance(did, str) or not did or len(did) > 16_384:
        raise DidError("the request needs a did")
    payload, signers, attached = b"", set[str](), None
    if attach is not None:
        if not isinstance(attach, dict):
            raise DidError("did_doc~attach must be an attachment object")
        payload, signers = verify_attachment(attach.get("data"))
        attached = did_peer.load_json(payload, "did_doc~attach")
    algo = did_peer.numalgo(did)
    if algo == 2:
        doc = parse_doc(did_peer.resolve_numalgo2(did), did)
    elif algo == 4 and did.count(":") == 3:
        doc = parse_doc(did_peer.resolve_numalgo4(did), did)
    elif algo in (None, 1, 4):
        source = attached if attached is not None else inline
        if source is None:
            raise DidError(f"{did[:60]!r} cannot be resolved without did_doc~attach")
        if attached is not None and not signers:
            raise DidError("did_doc~attach must be signed (a JWS by the DID's key)")
        if algo == 1:
            did_peer.check_numalgo1(did, payload, source)
        doc = parse_doc(source, did)
    else:
        raise DidError(f"did:peer numalgo {algo} is not supported (1, 2 and 4 are)")
    if signers and not signers & (
        set(doc.keys) | {k for s in doc.services for k in s.recipient_keys}
    ):
        raise DidError("did_doc~attach is signed by a key that is not in the document")
    return doc


async def record(
    ctx: Context, doc: PeerDoc, invitation: Inviter, protocol: str, label: Any
) -> Handshake:
    """Check the requester against the envelope and the store, then record the connection
    (responded). ProblemReport, with nothing changed, when the key is taken or the
    single-use invitation was used meanwhile."""
    their_key = doc.recipient_key
    sender = ctx.message.sender_verkey
    if sender is not None and sender not in doc.keys and sender != their_key:
        raise ProblemReport(NOT_ACCEPTED, "the envelope's sender key is not in the DID document")
    if await ctx.services.store.has_handshake(their_key):
        raise ProblemReport(
            NOT_ACCEPTED, "a connection with this key exists already (a replayed request?)"
        )
    if invitation.single_use and not await ctx.services.handshakes.consume(
        invitation.keys.verkey_b58
    ):
        raise ProblemReport(NOT_ACCEPTED, "this invitation has been used")
    handshake = Handshake(
        verkey=their_key,
        did=doc.did,
        label=label if isinstance(label, str) else "",
        protocol=protocol,
        thid=ctx.message.thread.thid,
        invitation=invitation.id,
        services=doc.push_services,
    )
    ours = ctx.services.keys_for(their_key).verkey_b58
    now_ms = await ctx.services.mailbox.now_ms()
    ttl = ctx.didcomm.unmediated_connection_seconds
    if not await ctx.services.handshakes.record(handshake, ours, now_ms, ttl):
        raise ProblemReport(NOT_ACCEPTED, "a connection with this key exists already")
    log.info("connection %s made by %s (%s)", their_key, protocol, handshake.label[:40])
    return handshake


async def answer(ctx: Context, handshake: Handshake, message: dict[str, Any]) -> Reply:
    """Send `message` to the new connection: back over the transport when the request asked
    for a return route, else through its queue to its endpoint, pushed after
    --handshake-push-delay-seconds (a requester may record its own request only after
    sending it: ACA-Py does)."""
    connection = await ctx.services.store.connection(handshake.verkey)
    reply = Reply(
        message=message,
        to=handshake.verkey,
        connection=connection,
        push_delay=ctx.didcomm.handshake_push_delay_seconds,
    )
    ctx.replies.append(reply)
    return reply


async def refuse(
    ctx: Context, doc: PeerDoc | None, error: ProblemReport | DidError, version: str
) -> None:
    """Refuse a request, changing nothing: a problem_report to the sender (authcrypted), else
    to the key its DID document names; with neither, a 400 with a JSON body."""
    code = error.code if isinstance(error, ProblemReport) else NOT_ACCEPTED
    to = ctx.message.sender_verkey or (doc.recipient_key if doc is not None else None)
    if to is None:
        raise ProblemReport(code, str(error), status=400) from error
    problem = handshake_problem(ctx, code, str(error), version)
    ctx.replies.append(Reply(message=problem, to=to))
