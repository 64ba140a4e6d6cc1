"""What handling one inbound message comes to, v1 or v2 (transport/inbound.py,
transport/inbound_v2.py): the replies that go back over the transport, or a refusal."""

from __future__ import annotations

from dataclasses import dataclass, field

from mediator.didcomm.message import Message, MessageType
from mediator.mediation.store import Connection
from mediator.protocols.context import Callback, ForwardTally

# Families whose messages never start an implicit drain: the pickup protocols themselves, and
# mediation set-up, which wallets that pick up explicitly also send with return_route "all".
NOT_DRAINING = ("messagepickup", "queue", "coordinate-mediation")


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    error: str
    retry_after: int | None = None  # seconds, for a 429

    def body(self) -> dict[str, str]:
        return {"error": self.error, "code": self.code}


@dataclass
class Outgoing:
    payload: bytes
    after_sent: Callback | None = None
    if_unsent: Callback | None = None


@dataclass
class Outcome:
    returned: list[Outgoing] = field(default_factory=list)
    refusal: Refusal | None = None
    message: Message | None = None
    connection: Connection | None = None
    problem: bool = False  # answered with a problem-report
    forward: ForwardTally | None = None  # a forward's: where it was queued
    v2: bool = False  # a DIDComm v2 message: its replies are v2's (media type, packing)
    v2_type: MessageType | None = None  # a v2 message's type, once read

    @property
    def may_drain(self) -> bool:
        """Implicit pickup: a return_route 'all' message (not a pickup or mediation one) from
        a granted connection that has never fetched explicitly."""
        c, m = self.connection, self.message
        return (
            c is not None
            and m is not None
            and c.granted
            and not c.explicit_pickup
            and m.return_route == "all"
            and m.type.family not in NOT_DRAINING
        )
