"""The path every inbound DIDComm message takes, whatever transport brought it:
open the envelope, parse and validate, find the connection, dispatch, and route the replies
(back over the transport when the return route allows, else into the connection's queue).

Nothing in here raises to the transport: unreadable input becomes a `Refusal` (an HTTP 4xx
with a JSON body, or a JSON frame on a WebSocket) and a refused message a problem-report.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, replace
from typing import Any

import orjson
from redis.exceptions import OutOfMemoryError

from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair
from mediator.didcomm.message import Message, MessageType
from mediator.didcomm.problem import problem_report
from mediator.didcomm.v2.message import is_v2
from mediator.errors import (
    EnvelopeError,
    LimitExceeded,
    NotAddressedHere,
    ProblemReport,
    QueueError,
    RateLimited,
    ReplicationShortfall,
)
from mediator.mediation.handshakes import COMPLETED, RESPONDED
from mediator.ops.metrics import Metrics
from mediator.protocols import HANDLERS, handler_for, is_anonymous
from mediator.protocols.context import (
    Context,
    Reply,
    Services,
    Session,
)
from mediator.protocols.v2 import HANDLERS as V2_HANDLERS
from mediator.settings import WebSocketSettings
from mediator.storage.clients import STORAGE_ERRORS, STORAGE_FULL
from mediator.transport.inbound_v2 import PipelineV2
from mediator.transport.outcome import Outcome, Outgoing, Refusal
from mediator.transport.socket_limits import AddressSockets

log = logging.getLogger(__name__)


# A connection in the `responded` state completes with its first message of any other family.
HANDSHAKES = ("didexchange", "connections")
# Families whose handlers change what a connection's record says (state, handshake): a
# session forgets its copy after them.
CHANGES_CONNECTION = (*HANDSHAKES, "coordinate-mediation")


def answers_at(scope: Any) -> bool:
    """Whether a path other than `/` is one the imported mediator's endpoints named (its
    wallets' and their contacts' DID documents still do): answered like `/`."""
    pipeline = getattr(scope["app"].state, "didcomm", None)
    return pipeline is not None and scope["path"] in pipeline.services.imported.paths


@dataclass(frozen=True)
class V2:
    """A DIDComm v2 message's JSON, for PipelineV2."""

    data: dict[str, Any]


OURS_KEPT = 100_000  # our per-connection keys a node keeps (about 0.85 KB each)


class Pipeline:
    def __init__(
        self, services: Services, websocket: WebSocketSettings, metrics: Metrics | None = None
    ) -> None:
        self.services = services
        self.websocket = websocket
        self.metrics = metrics
        self.sockets = AddressSockets(
            websocket.sockets_per_address, services.limiter.exempt_networks
        )
        self._counters: dict[tuple[tuple[str, int, str], str, str], Any] = {}
        self._ours: dict[str, KeyPair] = {}  # our per-connection keys met so far
        self.v2 = PipelineV2(services)

    def _known_key(self, kid: str) -> KeyPair | None:
        """The cluster's key, an imported routing or invitation key, or our key on a
        connection this node has met."""
        identity = self.services.identity
        if kid == identity.verkey_b58:
            return identity
        return self._ours.get(kid) or self.services.imported.keys.get(kid)

    async def _other_keys(self, data: Any) -> dict[str, KeyPair]:
        """Keys besides the cluster's that may open `data`: our key on a connection, or an
        open single-use invitation's (a handshake request)."""
        try:
            kids = [k for k in envelope.recipient_kids(data)[:8] if isinstance(k, str)]
        except EnvelopeError:
            return {}
        kids = [k for k in kids if 40 <= len(k) <= 48]
        held: dict[str, KeyPair] = {}
        handshakes = self.services.handshakes
        for ours, peer in (await handshakes.peers_of(kids)).items():
            keypair: KeyPair | None = self.services.keys_for(peer)
            if keypair is not None and keypair.verkey_b58 != ours:  # not derived: imported?
                keypair = await self.services.store.imported_key(peer)
            if keypair is not None and keypair.verkey_b58 == ours:
                held[ours] = keypair
                if len(self._ours) >= OURS_KEPT:  # the longest kept goes (not all at once)
                    del self._ours[next(iter(self._ours))]
                self._ours[ours] = keypair  # a connection's key never changes: kept
        if held:
            return held
        return {
            k: invitation.keys for k, invitation in (await handshakes.invitations(kids)).items()
        }

    async def handle(self, raw: bytes, session: Session, *, capacity: int | None) -> Outcome:
        try:
            outcome = await self._handle(raw, session, capacity)
        except RateLimited as exc:
            outcome = Outcome(refusal=Refusal(429, "rate-limited", exc.reason, exc.retry_after))
            if self.metrics is not None:
                self.metrics.refused_by(exc.limit)
        except ReplicationShortfall as exc:  # stored, but not as durably as the settings ask
            log.warning("send not confirmed: %s", exc)
            outcome = Outcome(refusal=Refusal(503, "not-confirmed", str(exc)))
        except OutOfMemoryError:
            log.warning("storage full: a write was refused (maxmemory)")
            outcome = Outcome(refusal=Refusal(507, "storage-full", STORAGE_FULL))
        except STORAGE_ERRORS as exc:
            log.warning("storage unavailable: %s", exc)
            outcome = Outcome(
                refusal=Refusal(503, "storage-unavailable", "storage unavailable; try again")
            )
        except Exception:  # a bug: answered, logged, and the socket's loop goes on
            log.exception("unexpected error handling a DIDComm message")
            outcome = Outcome(refusal=Refusal(500, "internal-error", "internal error"))
        if self.metrics is not None:
            self._count(outcome)
        return outcome

    def _count(self, outcome: Outcome) -> None:
        assert self.metrics is not None
        if outcome.message is not None:
            mtype: MessageType | None = outcome.message.type
        else:
            mtype = outcome.v2_type
        name = ("", 0, "") if mtype is None else (mtype.family, mtype.major, mtype.name)
        result = "ok"
        if outcome.refusal is not None:
            result = "refused"
        elif outcome.problem:
            result = "problem_report"
        version = "v2" if outcome.v2 else "v1"
        counter = self._counters.get((name, result, version))
        if counter is None:
            known = name in (V2_HANDLERS if outcome.v2 else HANDLERS)
            label = f"{name[0]}/{name[1]}/{name[2]}" if known else "other"
            counter = self.metrics.didcomm_messages.labels(label, result, version)
            if known:  # a bounded set of label children, looked up once
                self._counters[(name, result, version)] = counter
        counter.inc()

    async def _handle(self, raw: bytes, session: Session, capacity: int | None) -> Outcome:
        opened = await self._open(raw)
        if isinstance(opened, Refusal):
            return Outcome(refusal=opened)
        if isinstance(opened, V2):
            return await self.v2.handle(opened.data, session, capacity)
        data, sender, recipient = opened
        try:
            message = Message.parse(data, sender_verkey=sender, recipient_verkey=recipient)
        except ProblemReport as exc:
            if sender is None:
                return Outcome(refusal=Refusal(400, exc.code, exc.description))
            # It cannot say how to answer it, so the answer goes back the way it came.
            report = problem_report(exc.code, exc.description, None)
            packed = self._pack(report, sender, self._addressed(recipient))
            return Outcome(returned=[Outgoing(packed)], problem=True)
        if sender is None and not is_anonymous(message.type):
            return Outcome(
                message=message,
                refusal=Refusal(
                    400, "authcrypt-required", f"{message.type} must be authcrypted by its sender"
                ),
            )
        connection = None
        if sender is not None and message.type.family != "routing":
            connection = session.known_connection(sender)
            if connection is None:
                connection = await self.services.store.connection(sender)
            if connection.handshake == RESPONDED and message.type.family not in HANDSHAKES:
                await self.services.handshakes.complete(sender)  # its first message since
                connection = replace(connection, handshake=COMPLETED)
        handshake = message.type.name == "request" and message.type.family in HANDSHAKES
        if handshake:
            await self._admit_handshake(session)
        ctx = Context(self.services, session, message, connection)
        outcome = Outcome(message=message, connection=connection)
        if message.type.family == "routing":
            outcome.forward = ctx.forward
        try:
            await handler_for(message.type)(ctx)
            if ctx.connection is not None and message.type.family not in CHANGES_CONNECTION:
                session.remember_connection(ctx.connection)
            elif sender is not None:
                session.forget_connection(sender)
        except QueueError as error:  # e.g. a queue deleted under a request: refuse, clearly
            if sender is None:
                outcome.refusal = Refusal(409, "refused", str(error))
                return outcome
            ctx.replies = [Reply(problem_report("refused", str(error), message))]
            outcome.problem = True
        except ProblemReport as exc:
            if exc.status is not None and (sender is None or not session.persistent):
                outcome.refusal = Refusal(exc.status, exc.code, exc.description)
                return outcome
            if sender is None:
                outcome.refusal = Refusal(400, exc.code, exc.description)
                return outcome
            ctx.replies = [Reply(problem_report(exc.code, exc.description, message))]
            outcome.problem = True
        if handshake and any(r.message.get("@type", "").endswith("/response") for r in ctx.replies):
            limiter = self.services.limiter  # a connection was made: counted, not refused now
            with contextlib.suppress(RateLimited):
                await limiter.take(limiter.connections, session.address)
        await self._route(ctx, outcome, capacity)
        return outcome

    async def _admit_handshake(self, session: Session) -> None:
        """Handshakes cost us signature checks and a record each: a client address gets so
        many per minute, and makes so many connections (RateLimited beyond)."""
        limiter = self.services.limiter
        await limiter.take(limiter.handshakes, session.address)
        await limiter.check(limiter.connections, session.address)

    async def _open(self, raw: bytes) -> tuple[Any, str | None, str | None] | Refusal | V2:
        try:
            data = orjson.loads(raw)
        except (ValueError, RecursionError):
            return Refusal(400, "invalid-json", "the body is not JSON")
        if is_v2(data):
            return V2(data)
        if isinstance(data, dict) and "protected" not in data:
            if not self.services.didcomm.allow_plaintext:
                return Refusal(
                    400, "plaintext-refused", "messages must be DIDComm envelopes (RFC 0019)"
                )
            return data, None, None
        try:
            try:
                unpacked = envelope.unpack(data, self._known_key)
            except NotAddressedHere:  # our key on a connection, or a single-use invitation's
                unpacked = envelope.unpack(data, (await self._other_keys(data)).get)
        except EnvelopeError as exc:
            return Refusal(400, "unreadable-envelope", str(exc))
        try:
            message = orjson.loads(unpacked.message)
        except (ValueError, RecursionError):
            if unpacked.sender_verkey is None:
                return Refusal(400, "invalid-json", "the decrypted message is not JSON")
            message = None  # Message.parse turns this into a problem-report
        return message, unpacked.sender_verkey, unpacked.recipient_verkey

    def _pack(self, message: dict[str, Any], to: str, sender: KeyPair) -> bytes:
        return envelope.pack(orjson.dumps(message), [to], sender)

    def _addressed(self, recipient: str | None) -> KeyPair:
        """The key of ours an inbound message was addressed to (the cluster's by default):
        what we answer from when the answer is on no connection."""
        key = recipient or ""
        return self._ours.get(key) or self.services.imported.keys.get(key) or self.services.identity

    async def _route(self, ctx: Context, outcome: Outcome, capacity: int | None) -> None:
        sender = ctx.message.sender_verkey
        for reply in ctx.replies:
            message = reply.message
            to = reply.to or sender
            if to is None:
                await _unsent(reply)
                continue
            target = reply.connection if reply.to else ctx.connection
            if target is not None and target.handshake is not None:
                ours = self.services.key_on(target)  # our key on that connection
            else:
                ours = self._addressed(ctx.message.recipient_verkey)
            if "~thread" not in message:
                message["~thread"] = await self.services.threads.reply_thread(to, ctx.message)
            thid = message["~thread"].get("thid", ctx.message.thread.thid)
            room = capacity is None or len(outcome.returned) < capacity
            if room and ctx.message.wants_return(thid):
                log.debug("%s to %s: returned", message.get("@type"), to)
                await self._add_queue_count(ctx, reply)
                outcome.returned.append(
                    Outgoing(self._pack(message, to, ours), reply.after_sent, reply.if_unsent)
                )
            elif reply.queueable and target is not None and target.has_queue:
                try:
                    await self.services.mailbox.enqueue(
                        to, self._pack(message, to, ours), to, confirm=False
                    )
                except LimitExceeded as exc:
                    log.warning("reply dropped: the connection's queue is full (%s)", exc)
                else:
                    log.debug("%s to %s: queued", message.get("@type"), to)
                    if target.push:
                        self.services.pusher.start(to, target.push, delay=reply.push_delay)
                await _unsent(reply)
            else:
                log.debug("%s to %s: not sent (no queue)", message.get("@type"), to)
                await _unsent(reply)

    async def _add_queue_count(self, ctx: Context, reply: Reply) -> None:
        """`~transport.queued_message_count` (RFC 0092), for connections with a queue."""
        connection = ctx.connection
        if connection is None or not connection.granted:
            return
        count = reply.queued_count
        if count is None:
            count = (await self.services.mailbox.status(connection.verkey)).waiting
        reply.message.setdefault("~transport", {})["queued_message_count"] = count


async def _unsent(reply: Reply) -> None:
    if reply.if_unsent is not None:
        await reply.if_unsent()
