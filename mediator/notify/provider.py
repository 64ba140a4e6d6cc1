"""What every notification provider shares: the device a notification goes to, what it says
(how many messages wait, never what they are), and how the provider answered.

A provider answers with one of four outcomes, which the notifier (notifier.py) acts on:
sent; gone (the token is unregistered or invalid: the device info is removed); retry (429,
5xx, a timeout: tried again with backoff, `Retry-After` honoured); refused (any other
answer: given up, the device kept, the cause logged and counted).
"""

from __future__ import annotations

import email.utils
import time
from dataclasses import dataclass
from typing import Literal, Protocol

import httpx

from mediator.errors import OutboundError

FCM = "fcm"
APNS = "apns"
SERVICES = (FCM, APNS)  # the two device-info protocols, push-notifications-<service>/1.0

# The `@type` of the payload, as RFC 0734 and RFC 0699 ask.
PAYLOAD_TYPES = {
    FCM: "https://didcomm.org/push-notifications-fcm",
    APNS: "https://didcomm.org/push-notifications-apns",
}


@dataclass(frozen=True)
class Device:
    service: str  # fcm or apns: the protocol it registered with
    token: str
    platform: str  # as the wallet said (fcm), or "ios" (apns)
    app: str  # the app (docs/push.md) whose credentials reach it

    @property
    def is_ios(self) -> bool:
        return self.service == APNS or self.platform.lower() in ("ios", "ipados", "apple")


@dataclass(frozen=True)
class Notice:
    """One notification: to whom, for which connection, and how many messages wait."""

    device: Device
    connection: str
    count: int
    title: str
    body: str
    notice_id: str  # unique: the webhook's idempotency key, the apns-id


@dataclass(frozen=True)
class Outcome:
    kind: Literal["sent", "gone", "retry", "refused"]
    detail: str = ""
    retry_after: float | None = None  # seconds the provider asked us to wait


class Provider(Protocol):
    name: str  # fcm, apns or webhook: the metrics' label

    async def send(self, notice: Notice) -> Outcome: ...

    async def aclose(self) -> None: ...


def retry_after(answer: httpx.Response) -> float | None:
    """`Retry-After` in seconds (delta or HTTP date), when the answer has one."""
    value = answer.headers.get("retry-after")
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def by_status(answer: httpx.Response, detail: str) -> Outcome:
    """The outcome an HTTP status means when the provider's body said nothing more."""
    status = answer.status_code
    if 200 <= status < 300:
        return Outcome("sent")
    if status == 429 or status >= 500:
        return Outcome("retry", f"{status} {detail}".strip(), retry_after(answer))
    return Outcome("refused", f"{status} {detail}".strip())


# What a call to a provider may raise short of an answer: retried as `unreachable`.
CALL_ERRORS = (httpx.HTTPError, httpx.InvalidURL, OSError, OutboundError)


def unreachable(exc: Exception) -> Outcome:
    return Outcome("retry", f"unreachable: {type(exc).__name__}: {exc}"[:300])
