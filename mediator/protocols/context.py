"""What a protocol handler gets: the inbound message, the node's services, the session it
arrived on, and a place to put replies. Handlers never talk to Redis themselves."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from mediator.cluster.handoffs import Handoffs
from mediator.cluster.presence import Presence
from mediator.didcomm.identity import connection_key
from mediator.didcomm.keys import KeyPair
from mediator.didcomm.mediator_did import MediatorDid
from mediator.didcomm.message import Message, new_id
from mediator.didcomm.v2.identity import MediatorV2, mediator_v2
from mediator.engine import Engine
from mediator.engine.model import ReceivedMessage
from mediator.engine.wakeups import WakeHub
from mediator.errors import ProblemReport
from mediator.mediation.abuse import Limiter
from mediator.mediation.handshakes import HandshakeBook
from mediator.mediation.imported import Imported
from mediator.mediation.mailbox import Mailbox
from mediator.mediation.push import Pusher
from mediator.mediation.store import Connection, MediationStore
from mediator.mediation.threads import ThreadBook
from mediator.notify.notifier import Notifier
from mediator.settings import DidcommSettings, QueueSettings

Callback = Callable[[], Awaitable[None]]
# What a live delivery loop sends for a batch of messages, when not a Pickup 2.0 delivery
# from our key on the connection (a DIDComm v2 wallet's: mediator/protocols/v2/pickup.py).
DeliveryWriter = Callable[[list[ReceivedMessage]], bytes]

# Pickup 2.0's own wording for a live-delivery-change on a transport that cannot do it.
NO_LIVE_DELIVERY = "Connection does not support Live Delivery"


@dataclass
class Services:
    """Everything a node shares between requests."""

    didcomm: DidcommSettings
    queue: QueueSettings  # the most a recipient may ask for (status-update-request)
    engine: Engine
    hub: WakeHub
    identity: KeyPair
    store: MediationStore
    mailbox: Mailbox
    threads: ThreadBook
    handshakes: HandshakeBook
    endpoints: tuple[str, ...]  # ours, in DID documents: HTTP(S) first, then WS(S)
    pusher: Pusher
    presence: Presence
    handoffs: Handoffs
    notifier: Notifier
    limiter: Limiter
    imported: Imported = field(default_factory=Imported)  # another mediator's, carried over

    def keys_for(self, connection: str) -> KeyPair:
        """Our key on the connection named by the peer's key `connection`, as our seed
        derives it (a connection made through us)."""
        return connection_key(self.identity, connection)

    def key_on(self, connection: Connection) -> KeyPair:
        """Our key on `connection`: the one it was imported with, else the derived one."""
        return connection.ours or self.keys_for(connection.verkey)

    def did_for(self, connection: str) -> MediatorDid:
        """Our DID and documents on that connection."""
        return MediatorDid(self.keys_for(connection), self.endpoints)

    @property
    def v2(self) -> MediatorV2:
        """Our DIDComm v2 identity (mediator/didcomm/v2/identity.py)."""
        return mediator_v2(self.identity, self.endpoints, self.didcomm.v2_nist_keys)


CONNECTION_MEMORY_SECONDS = 5.0  # how long a persistent session trusts its copy of a record


class Session:
    """The transport a message came in on. HTTP sessions carry one reply and nothing else;
    the WebSocket session overrides what a persistent transport can do."""

    persistent = False

    def __init__(self, address: str = "") -> None:
        self.address = address  # the client's, as the abuse limits count it (client_address)
        self.explicit_pickup = False  # a pickup or queue message came on this transport
        self._connections: dict[str, tuple[Connection, float]] = {}

    def known_connection(self, verkey: str) -> Connection | None:
        """A socket's copy of its connection's record, read less than
        CONNECTION_MEMORY_SECONDS ago and kept up to date with what its own messages
        changed (a change made through another node shows within that time)."""
        entry = self._connections.get(verkey)
        if entry is None or entry[1] < time.monotonic():
            return None
        return entry[0]

    def remember_connection(self, connection: Connection) -> None:
        if self.persistent:
            now = time.monotonic()
            known = self._connections.get(connection.verkey)
            # A copy is not trusted longer for being used: a fresh one keeps its deadline.
            deadline = known[1] if known is not None and known[1] >= now else now
            self._connections[connection.verkey] = (
                connection,
                deadline if deadline > now else now + CONNECTION_MEMORY_SECONDS,
            )

    def forget_connection(self, verkey: str) -> None:
        self._connections.pop(verkey, None)

    def is_live(self, connection: str) -> bool:
        return False

    async def start_live(
        self,
        connection: str,
        since_ms: int,
        ours: KeyPair | None = None,
        writer: DeliveryWriter | None = None,
    ) -> None:
        """Deliver `connection`'s messages as they come, from `ours` (our key on it), or
        as `writer` writes them."""
        raise ProblemReport(
            "live-delivery-not-supported", "Connection does not support Live Delivery"
        )

    async def stop_live(self, connection: str) -> None:
        return None

    def offered(self, connection: str, message_ids: list[str]) -> None:
        """Deliveries this transport carried: offered again when it closes unacknowledged."""
        return None

    def acknowledged(self, connection: str, message_ids: list[str]) -> None:
        return None

    def pickup_seen(self, connection: str, now_ms: int) -> None:
        """A pickup answer (status or delivery) reflected the queue at `now_ms` (Redis time)."""
        return None

    def live_since(self, connection: str, now_ms: int) -> int:
        """From when live mode, turned on at `now_ms`, delivers new messages."""
        return now_ms


@dataclass
class Reply:
    message: dict[str, Any]
    queueable: bool = True  # a pickup status never enters the queue
    after_sent: Callback | None = None  # e.g. delete what the reply carried
    if_unsent: Callback | None = None  # e.g. offer those messages again
    queued_count: int | None = None  # for ~transport.queued_message_count, when known
    to: str | None = None  # the key to encrypt for, when not the inbound message's sender
    connection: Connection | None = None  # where it queues, when not the sender's connection
    push_delay: float = 0.0  # seconds before a queued reply is pushed to the peer's endpoint


@dataclass
class ForwardTally:
    """What a forward did: the connections it was queued for, and those that held the same
    envelope already (not stored again)."""

    queued: int = 0
    duplicates: int = 0


@dataclass
class Context:
    services: Services
    session: Session
    message: Message
    connection: Connection | None = None
    replies: list[Reply] = field(default_factory=list)
    forward: ForwardTally = field(default_factory=ForwardTally)

    @property
    def didcomm(self) -> DidcommSettings:
        return self.services.didcomm

    @property
    def can_return(self) -> bool:
        """Whether a reply on this message's own thread can go back over its transport."""
        return self.message.wants_return(self.message.thread.thid)

    def require_connection(self) -> Connection:
        if self.connection is None:
            raise ProblemReport(
                "authcrypt-required",
                "this message must be authcrypted by the connection it acts for",
            )
        if self.connection.handshake is None:
            raise ProblemReport(
                "unknown-connection",
                "no connection has this key: connect first through the mediator's invitation "
                "(DID Exchange or connections 1.0)",
            )
        return self.connection

    def require_mediation(self) -> Connection:
        connection = self.require_connection()
        if not connection.granted:
            raise ProblemReport(
                "mediation-not-granted",
                "mediation has not been granted to this connection: send a mediate-request",
            )
        return connection

    def require_return_route(self) -> None:
        if not self.can_return:
            raise ProblemReport(
                "return-route-required",
                "this request is answered over its own transport: set ~transport.return_route "
                'to "all"',
            )

    def reply(self, name: str, body: dict[str, Any], **options: Any) -> Reply:
        """A reply of type `name` in the inbound message's family and prefix."""
        message = {"@type": self.message.type.reply(name), "@id": new_id(), **body}
        reply = Reply(message=message, **options)
        self.replies.append(reply)
        return reply
