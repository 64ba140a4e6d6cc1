"""A DIDComm v2 plaintext message as the handlers see it: its type, id, thread, return
route and the DID that proved it sent it, validated once (DIDComm Messaging 2.1 §Message
Headers, §Threads, and the return_route extension's header).

Liberal where the two real v2 peers differ: `created_time` and `expires_time` are not
required to be numbers (Veramo writes an ISO string); the message's own `expires_time`
is honoured only where a protocol says so (routing 2.0's forward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from mediator.didcomm.envelope import b64url_decode
from mediator.didcomm.message import MessageType
from mediator.didcomm.v2.unpack import Received
from mediator.errors import EnvelopeError, ProblemReport

RETURN_ROUTES = ("none", "all", "thread")
MAX_ID = 256  # ids are opaque; one longer than this is not an id anybody made


@dataclass(frozen=True)
class MessageV2:
    type: MessageType
    id: str
    body: dict[str, Any]
    thid: str  # the message's own id when it starts a thread
    pthid: str | None
    return_route: str
    sender: str | None  # the DID that authcrypted or signed it (None: anonymous)
    raw: dict[str, Any]
    tagless: bool = False  # authcrypted as ECDH-1PU draft 3 did (Veramo): answered alike
    addressed: str = ""  # the DID whose key it was encrypted to (ours, in some form)

    @property
    def type_uri(self) -> str:
        return str(self.raw.get("type", ""))

    @property
    def attachments(self) -> list[Any]:
        found = self.raw.get("attachments")
        return found if isinstance(found, list) else []

    def wants_return(self) -> bool:
        """Whether an answer may go back over the transport this came on."""
        return self.return_route in ("all", "thread")

    @classmethod
    def of(cls, received: Received) -> MessageV2:
        """ProblemReport for a header a handler could not trust."""
        raw = received.message
        mtype = MessageType.parse(raw.get("type"))
        mid = raw["id"]  # unpack checked: a non-empty string
        if len(mid) > MAX_ID:
            raise ProblemReport("invalid-message-id", f"id is longer than {MAX_ID} characters")
        thid = raw.get("thid") or mid
        pthid = raw.get("pthid") or None
        for name, value in (("thid", thid), ("pthid", pthid)):
            if value is not None and len(value) > MAX_ID:
                raise ProblemReport("invalid-thread", f"{name} is longer than {MAX_ID}")
        route = raw.get("return_route", "none")
        if route not in RETURN_ROUTES:
            raise ProblemReport("invalid-transport", "return_route must be none, all or thread")
        return cls(
            type=mtype,
            id=mid,
            body=raw.get("body") or {},
            thid=thid,
            pthid=pthid,
            return_route=str(route),
            sender=received.sender,
            raw=raw,
            tagless=received.tagless,
            addressed=(received.recipient_kid or "").split("#", 1)[0],
        )


def is_v2(data: Any) -> bool:
    """Whether a JSON message is DIDComm v2's: a JWE whose key agreement is ECDH (v1's
    envelopes say Authcrypt or Anoncrypt), a JWS, or a plaintext with `type` (v1's has
    `@type`)."""
    if not isinstance(data, dict):
        return False
    protected = data.get("protected")
    if "ciphertext" in data and isinstance(protected, str) and len(protected) < 65_536:
        try:
            header = orjson.loads(b64url_decode(protected, "protected"))
        except (EnvelopeError, ValueError, RecursionError):
            return False
        alg = header.get("alg") if isinstance(header, dict) else None
        return isinstance(alg, str) and alg.startswith("ECDH-")
    if "payload" in data and ("signatures" in data or "signature" in data):
        return True
    return "type" in data and "@type" not in data and "ciphertext" not in data
