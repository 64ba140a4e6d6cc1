"""A decrypted DIDComm v1 message: its type, id, thread (RFC 0008) and transport decorator
(RFC 0092), validated once so that handlers only see well-formed values."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mediator.errors import ProblemReport
from mediator.randomness import uuid4

DIDCOMM_ORG = "https://didcomm.org/"
DID_SOV = "did:sov:BzCbsNYhMrjHiqZDTUASHg;spec/"
PREFIXES = (DIDCOMM_ORG, DID_SOV)

# RFC 0008 writes [-_./a-ZA-Z0-9]{8,64}; a-Z is a typo for a-z.
MESSAGE_ID = re.compile(r"[-_./a-zA-Z0-9]{8,64}")
_TYPE = re.compile(
    r"(?P<family>[a-z0-9][a-z0-9._-]*)/(?P<major>\d+)\.(?P<minor>\d+)/(?P<name>[A-Za-z0-9_-]+)"
)

RETURN_ROUTES = ("none", "all", "thread")
MAX_DEPTH = 32


@dataclass(frozen=True)
class MessageType:
    prefix: str
    family: str
    major: int
    minor: int
    name: str

    @classmethod
    def parse(cls, value: object) -> MessageType:
        if not isinstance(value, str) or not value:
            raise ProblemReport("invalid-message", "@type is missing or not a string")
        for prefix in PREFIXES:
            if value.startswith(prefix):
                match = _TYPE.fullmatch(value[len(prefix) :])
                if match:
                    return cls(
                        prefix=prefix,
                        family=match["family"],
                        major=int(match["major"]),
                        minor=int(match["minor"]),
                        name=match["name"],
                    )
                break
        raise ProblemReport("unsupported-message-type", f"unsupported message type {value!r}")

    def reply(self, name: str, family: str | None = None, version: str | None = None) -> str:
        """A type in the same family and with the prefix the peer used."""
        version = version or f"{self.major}.{self.minor}"
        return f"{self.prefix}{family or self.family}/{version}/{name}"

    def __str__(self) -> str:
        return f"{self.prefix}{self.family}/{self.major}.{self.minor}/{self.name}"


@dataclass(frozen=True)
class Thread:
    """`~thread` with RFC 0008's defaults applied: thid is the message's own id when absent."""

    thid: str
    pthid: str | None = None
    sender_order: int = 0
    received_orders: dict[str, int] = field(default_factory=dict)
    explicit: bool = False  # the message carried a ~thread with a thid

    @property
    def implicit_reply(self) -> bool:
        return self.explicit and self.sender_order == 0


@dataclass(frozen=True)
class Message:
    type: MessageType
    id: str
    body: dict[str, Any]
    thread: Thread
    return_route: str = "none"
    return_route_thread: str | None = None
    sender_verkey: str | None = None
    recipient_verkey: str | None = None

    @property
    def type_uri(self) -> str:
        return str(self.type)

    def wants_return(self, thid: str) -> bool:
        """Whether a message on thread `thid` may go back over the connection this came on."""
        if self.return_route == "all":
            return True
        return self.return_route == "thread" and self.return_route_thread == thid

    @classmethod
    def parse(
        cls,
        raw: object,
        *,
        sender_verkey: str | None = None,
        recipient_verkey: str | None = None,
    ) -> Message:
        if not isinstance(raw, dict):
            raise ProblemReport("invalid-message", "a DIDComm message must be a JSON object")
        if _depth(raw) > MAX_DEPTH:
            raise ProblemReport("invalid-message", f"JSON nested deeper than {MAX_DEPTH} levels")
        mtype = MessageType.parse(raw.get("@type"))
        mid = raw.get("@id")
        if not isinstance(mid, str) or not MESSAGE_ID.fullmatch(mid):
            raise ProblemReport(
                "invalid-message-id",
                "@id must be 8 to 64 characters of letters, digits and -_./ (RFC 0008)",
            )
        thread = _thread(raw.get("~thread"), mid)
        route, route_thread = _transport(raw.get("~transport"))
        if route == "thread" and route_thread is None:
            route_thread = thread.thid  # Queue Management's examples name no thread: their own
        return cls(
            type=mtype,
            id=mid,
            body=raw,
            thread=thread,
            return_route=route,
            return_route_thread=route_thread,
            sender_verkey=sender_verkey,
            recipient_verkey=recipient_verkey,
        )


def new_id() -> str:
    return uuid4()


def _thread(value: object, mid: str) -> Thread:
    if value is None:
        return Thread(thid=mid)
    if not isinstance(value, dict):
        raise ProblemReport("invalid-thread", "~thread must be an object")
    thid = value.get("thid")
    pthid = value.get("pthid")
    order = value.get("sender_order", 0)
    received = value.get("received_orders", {})
    for name, item in (("thid", thid), ("pthid", pthid)):
        if item is not None and (not isinstance(item, str) or not MESSAGE_ID.fullmatch(item)):
            raise ProblemReport("invalid-thread", f"~thread.{name} is not a valid message id")
    if isinstance(order, bool) or not isinstance(order, int) or order < 0:
        raise ProblemReport("invalid-thread", "~thread.sender_order must be a whole number >= 0")
    if not isinstance(received, dict) or not all(
        isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v >= -1
        for k, v in received.items()
    ):
        raise ProblemReport(
            "invalid-thread", "~thread.received_orders must map senders to numbers >= -1"
        )
    explicit = thid is not None and thid != mid
    return Thread(
        thid=thid or mid,
        pthid=pthid,
        sender_order=order,
        received_orders=dict(received),
        explicit=explicit,
    )


def _transport(value: object) -> tuple[str, str | None]:
    if value is None:
        return "none", None
    if not isinstance(value, dict):
        raise ProblemReport("invalid-transport", "~transport must be an object")
    route = value.get("return_route", "none")
    if route not in RETURN_ROUTES:
        raise ProblemReport(
            "invalid-transport", "~transport.return_route must be none, all or thread"
        )
    thread = value.get("return_route_thread")
    if thread is not None and not isinstance(thread, str):
        raise ProblemReport("invalid-transport", "return_route_thread must be a string")
    return str(route), thread if route == "thread" else None


def _depth(value: object, level: int = 0) -> int:
    """How deeply containers nest (leaves are not visited: most values are strings)."""
    if level > MAX_DEPTH:
        return level
    items = value.values() if isinstance(value, dict) else value
    assert isinstance(items, Iterable)
    deepest = level + 1
    for item in items:
        if isinstance(item, dict | list):
            deepest = max(deepest, _depth(item, level + 1))
    return deepest
