"""What a DIDComm v2 handler gets: the message, the node's services (the same as v1's), the
session it arrived on, the sender's wallet record, and a place to put replies."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from mediator.didcomm.v2.message import MessageV2
from mediator.errors import ProblemReport
from mediator.mediation.store import Connection
from mediator.protocols.context import Callback, ForwardTally, Services, Session

DIDCOMM_ORG = "https://didcomm.org/"


@dataclass
class ReplyV2:
    message: dict[str, Any]
    queueable: bool = True  # a pickup status never enters the queue
    after_sent: Callback | None = None
    if_unsent: Callback | None = None


@dataclass
class ContextV2:
    services: Services
    session: Session
    message: MessageV2
    connection: Connection | None = None  # the sender's wallet record (None: anonymous)
    replies: list[ReplyV2] = field(default_factory=list)
    forward: ForwardTally = field(default_factory=ForwardTally)
    # Packs a message for the sender (authcrypt from the mediator's DID), as replies are.
    pack: Callable[[dict[str, Any]], bytes] = field(default=lambda message: b"")

    def require_sender(self) -> Connection:
        if self.connection is None:
            raise ProblemReport(
                "authcrypt-required",
                "this message must be authcrypted (or signed) by the DID it acts for",
            )
        return self.connection

    def require_mediation(self) -> Connection:
        connection = self.require_sender()
        if not connection.granted:
            raise ProblemReport(
                "mediation-not-granted",
                "mediation has not been granted to this DID: send a mediate-request",
            )
        return connection

    def reply(self, name: str, body: dict[str, Any], **options: Any) -> ReplyV2:
        """A reply named `name` in the inbound message's protocol and version, on its
        thread."""
        mtype = self.message.type
        message = {
            "id": str(uuid.uuid4()),
            "type": f"{DIDCOMM_ORG}{mtype.family}/{mtype.major}.{mtype.minor}/{name}",
            "thid": self.message.thid,
            "body": body,
        }
        reply = ReplyV2(message, **options)
        self.replies.append(reply)
        return reply
