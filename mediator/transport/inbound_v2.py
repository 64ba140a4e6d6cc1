"""The path a DIDComm v2 message takes (transport/inbound.py hands it over when the JSON is
v2's): open its layers with the mediator's v2 key, read the plaintext, find the sender's
wallet record by its DID, dispatch, and route the replies, authcrypted from the mediator's
DID to the sender's: back over the transport when `return_route` allows, else into the
wallet's queue (Identus sends keylist-update without it and picks the answer up).

As on the v1 path nothing raises to the transport: what cannot be read is a `Refusal` (an
HTTP 4xx with a JSON body, or a JSON frame on a WebSocket), and a refused message from a
known sender a problem-report 2.0.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

from mediator.didcomm.v2 import problem as problems
from mediator.didcomm.v2.dids import resolve
from mediator.didcomm.v2.identity import multikey_x25519
from mediator.didcomm.v2.jwk import PrivateKey
from mediator.didcomm.v2.message import MessageV2
from mediator.didcomm.v2.unpack import Received, first_agreement_curve, pack, unpack
from mediator.errors import DidError, EnvelopeError, LimitExceeded, ProblemReport, QueueError
from mediator.mediation import wallets_v2
from mediator.mediation.store import Connection
from mediator.protocols.context import Services, Session
from mediator.protocols.v2 import handler_for, is_anonymous
from mediator.protocols.v2.context import ContextV2, ReplyV2
from mediator.transport.outcome import Outcome, Outgoing, Refusal

log = logging.getLogger(__name__)

ENCRYPTED = "application/didcomm-encrypted+json"


class PipelineV2:
    def __init__(self, services: Services) -> None:
        self.services = services
        self.mediator = services.v2
        self.our_dids = self.mediator.dids(services.didcomm.did_web)
        # Our key agreement keys by every kid a sender may write: under each of our DIDs,
        # or the fragment alone (some libraries keep only that).
        keys = self.mediator.agreement_keys
        self._kids: dict[str, PrivateKey] = {
            f"{did}#{fragment}": key
            for fragment, key in keys.items()
            for did in (*self.our_dids, "")
        }
        self._by_public = {key.public: key for key in keys.values()}
        self._ours_x = ".E" + multikey_x25519(services.identity.x25519_public)

    def _ours(self, kid: str) -> PrivateKey | None:
        """Our key agreement key, by the kid a sender wrote; also under our did:peer:2 as
        another node writes it (its services name its own endpoints where the nodes are not
        behind one address): any did:peer:2 with our X25519 key whose key so named is ours."""
        found = self._kids.get(kid)
        if found is not None:
            return found
        if kid.startswith("did:peer:2") and self._ours_x in kid:
            try:
                key = resolve(kid.split("#", 1)[0]).agreement_key(kid)
            except DidError:
                return None
            return None if key is None else self._by_public.get(key)
        return None

    async def handle(self, data: dict[str, Any], session: Session, capacity: int | None) -> Outcome:
        try:
            received = unpack(data, self._ours, self.our_dids)
        except (EnvelopeError, DidError) as exc:
            return Outcome(refusal=Refusal(400, "unreadable-envelope", str(exc)), v2=True)
        if not received.layers and not self.services.didcomm.allow_plaintext:
            return Outcome(
                refusal=Refusal(
                    400, "plaintext-refused", "DIDComm v2 messages must be encrypted or signed"
                ),
                v2=True,
            )
        try:
            message = MessageV2.of(received)
        except ProblemReport as exc:
            return self._refused_early(exc, received)
        sender = message.sender
        if sender is None and not is_anonymous(message.type):
            return Outcome(
                refusal=Refusal(
                    400, "authcrypt-required", f"{message.type} must be authcrypted by its sender"
                ),
                v2=True,
                v2_type=message.type,
            )
        connection = None
        if sender is not None and message.type.family != "routing":
            try:
                connection = await self._wallet(sender, session)
            except DidError as exc:
                refusal = Refusal(400, "unusable-did", f"the sender's DID: {exc}")
                return Outcome(refusal=refusal, v2=True)
        ctx = ContextV2(
            self.services,
            session,
            message,
            connection,
            pack=lambda reply: self._pack(reply, message),
        )
        outcome = Outcome(connection=connection, v2=True, v2_type=message.type)
        if message.type.family == "routing":
            outcome.forward = ctx.forward
        try:
            await handler_for(message.type)(ctx)
            if ctx.connection is not None and message.type.family != "coordinate-mediation":
                session.remember_connection(ctx.connection)
            elif connection is not None:
                session.forget_connection(connection.verkey)
        except QueueError as error:
            if sender is None:
                outcome.refusal = Refusal(409, "refused", str(error))
                return outcome
            self._problem(ctx, ProblemReport("refused", str(error)))
            outcome.problem = True
        except ProblemReport as exc:
            if exc.status is not None and (sender is None or not session.persistent):
                outcome.refusal = Refusal(exc.status, exc.code, exc.description)
                return outcome
            if sender is None:
                outcome.refusal = Refusal(400, exc.code, exc.description)
                return outcome
            self._problem(ctx, exc)
            outcome.problem = True
        await self._route(ctx, outcome, capacity)
        log.debug(
            "v2 %s from %s: %s, %d returned",
            message.type,
            "an anonymous sender" if sender is None else sender[:48],
            "problem-report" if outcome.problem else "ok",
            len(outcome.returned),
        )
        return outcome

    async def _wallet(self, did: str, session: Session) -> Connection:
        """The sender's record: a socket's copy (as v1 connections' are kept, a few
        seconds), else read."""
        for name in wallets_v2.names_of(did):
            known = session.known_connection(name)
            if known is not None:
                return known
        return await wallets_v2.wallet(self.services.store, did)

    def _refused_early(self, exc: ProblemReport, received: Received) -> Outcome:
        """A plaintext whose headers cannot be used: a problem-report back the way it came
        to a sender we know, a refusal to anyone else."""
        sender = received.sender
        if sender is None:
            return Outcome(refusal=Refusal(400, exc.code, exc.description), v2=True)
        report = problems.problem_report(
            problems.code_for(exc.code), received.message, [exc.description]
        )
        try:
            addressed = (received.recipient_kid or "").split("#", 1)[0]
            packed = self._pack_to(report, sender, received.tagless, addressed)
        except (DidError, EnvelopeError):
            return Outcome(refusal=Refusal(400, exc.code, exc.description), v2=True)
        return Outcome(returned=[Outgoing(packed)], problem=True, v2=True)

    def _problem(self, ctx: ContextV2, exc: ProblemReport) -> None:
        report = problems.problem_report(
            problems.code_for(exc.code), ctx.message.raw, [exc.description]
        )
        ctx.replies = [ReplyV2(report)]  # queued, as v1's, when it cannot go back

    def _pack(self, message: dict[str, Any], inbound: MessageV2) -> bytes:
        assert inbound.sender is not None
        return self._pack_to(message, inbound.sender, inbound.tagless, inbound.addressed)

    def _pack_to(self, message: dict[str, Any], to: str, tagless: bool, addressed: str) -> bytes:
        """Authcrypt from the DID of ours the peer wrote to (the did:peer:2 when it wrote to
        another node's form of it or sent nothing encrypted), with our key on the curve of
        the peer's first key agreement key; anoncrypt to a curve we have no key on (P-521)."""
        mediator = self.mediator
        ours = addressed if addressed in self.our_dids else mediator.did
        message.setdefault("to", [to])
        message.setdefault("created_time", int(time.time()))
        sender = mediator.sender_for(first_agreement_curve(to), ours)
        if sender is None:
            return orjson.dumps(pack(message, to))
        message.setdefault("from", ours)
        return orjson.dumps(pack(message, to, sender=sender, tagless=tagless))

    async def _route(self, ctx: ContextV2, outcome: Outcome, capacity: int | None) -> None:
        inbound = ctx.message
        queue_to: Connection | None = None
        for reply in ctx.replies:
            if inbound.sender is None:
                await _unsent(reply)
                continue
            try:
                packed = self._pack(reply.message, inbound)
            except (DidError, EnvelopeError) as exc:
                log.info("a reply to %s cannot be encrypted: %s", inbound.sender[:60], exc)
                await _unsent(reply)
                continue
            room = capacity is None or len(outcome.returned) < capacity
            if room and inbound.wants_return():
                outcome.returned.append(Outgoing(packed, reply.after_sent, reply.if_unsent))
                continue
            if reply.queueable and ctx.connection is not None:
                if queue_to is None:  # read again: the message may have granted it
                    queue_to = await self.services.store.connection(ctx.connection.verkey)
                if queue_to.has_queue:
                    await self._enqueue(queue_to.verkey, packed)
            await _unsent(reply)

    async def _enqueue(self, connection: str, packed: bytes) -> None:
        try:
            await self.services.mailbox.enqueue(connection, packed, connection, confirm=False)
        except LimitExceeded as exc:
            log.warning("reply dropped: the wallet's queue is full (%s)", exc)


async def _unsent(reply: ReplyV2) -> None:
    if reply.if_unsent is not None:
        await reply.if_unsent()
