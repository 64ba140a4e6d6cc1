"""A generic webhook receiver: a plain HTTP server that records every POST (path, headers, body)
and answers as scripted, and the signature scheme the mediator's webhook notifier uses.

The signature header, Stripe-like: `X-Mediator-Signature: t=<unix seconds>,v1=<hex>`, where
the hex is HMAC-SHA256(secret, f"{t}.".encode() + body) over the exact body bytes sent. Several
`v1=` entries may appear (secret rotation); one matching is enough. A receiver built with a
`secret` refuses a missing or wrong signature, or one older than `tolerance` seconds, with 400,
as a real receiver following that scheme would; without a secret it accepts anything."""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from tests.providers.base import Outcome, UvicornServer
from tests.providers.credentials import TlsCert

SIGNATURE_HEADER = "X-Mediator-Signature"
DEFAULT_TOLERANCE_SECONDS = 300


def _key(secret: str | bytes) -> bytes:
    return secret.encode() if isinstance(secret, str) else secret


def sign(secret: str | bytes, body: bytes, timestamp: int | None = None) -> str:
    """The header value for `body`, as the notifier must produce it."""
    t = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(_key(secret), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"


def verify_signature(
    secret: str | bytes,
    body: bytes,
    header_value: str | None,
    *,
    tolerance: float | None = DEFAULT_TOLERANCE_SECONDS,
    now: float | None = None,
) -> bool:
    """Whether `header_value` signs `body` with `secret` (some v1 entry matches, compared in
    constant time) and its t is within `tolerance` seconds of now (None: any age)."""
    if not header_value:
        return False
    timestamp: int | None = None
    candidates: list[str] = []
    for item in header_value.split(","):
        name, sep, value = item.strip().partition("=")
        if not sep:
            return False
        if name == "t":
            if not value.isdigit() or timestamp is not None:
                return False
            timestamp = int(value)
        elif name == "v1":
            candidates.append(value.lower())
    if timestamp is None or not candidates:
        return False
    current = time.time() if now is None else now
    if tolerance is not None and abs(current - timestamp) > tolerance:
        return False
    expected = hmac.new(_key(secret), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return any(hmac.compare_digest(expected, candidate) for candidate in candidates)


@dataclass(frozen=True)
class WebhookDelivery:
    """A POST the receiver accepted (status < 300): path, headers (lower-case names), body."""

    path: str
    headers: dict[str, str]
    body: bytes
    time: float

    @property
    def signature(self) -> str | None:
        return self.headers.get(SIGNATURE_HEADER.lower())


class WebhookServer(UvicornServer):
    """Records POSTs to any path under `url`; answers 200 `{}` unless scripted otherwise."""

    name = "webhook"

    def __init__(
        self,
        secret: str | bytes | None = None,
        *,
        tolerance: float | None = DEFAULT_TOLERANCE_SECONDS,
        tls: TlsCert | None = None,
    ) -> None:
        super().__init__(tls)
        self.secret = secret
        self.tolerance = tolerance
        self.deliveries: list[WebhookDelivery] = []
        self.attempts: list[WebhookDelivery] = []
        """Every POST, including those refused or failed by script."""
        self._records = threading.Lock()

    def app(self) -> Starlette:
        return Starlette(routes=[Route("/{path:path}", self._post, methods=["POST"])])

    def fail(
        self,
        path: str,
        status: int = 503,
        *,
        times: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        """POSTs to `path` (e.g. "/hook") answer `status`, `times` times (None: until
        cleared), with Retry-After if `retry_after` is given."""
        self.script.for_key(path, Outcome(status, str(status), retry_after, times))

    def fail_next(self, count: int, status: int = 503, *, retry_after: int | None = None) -> None:
        """The next `count` POSTs, whatever their path, answer `status`."""
        self.script.next(count, Outcome(status, str(status), retry_after, 1))

    async def wait_for(
        self,
        count: int = 1,
        timeout: float = 5.0,  # noqa: ASYNC109
    ) -> list[WebhookDelivery]:
        """Wait until at least `count` POSTs were accepted; all of them so far."""
        what = f"{count} deliveries"
        await self.wait_until(lambda: len(self.deliveries) >= count, timeout, what)
        return list(self.deliveries)

    def wait_for_sync(self, count: int = 1, timeout: float = 5.0) -> list[WebhookDelivery]:
        what = f"{count} deliveries"
        self.wait_until_sync(lambda: len(self.deliveries) >= count, timeout, what)
        return list(self.deliveries)

    async def _post(self, request: Request) -> Response:
        self.requests += 1
        body = await request.body()
        record = WebhookDelivery(request.url.path, dict(request.headers), body, time.time())
        with self._records:
            self.attempts.append(record)
        if self.secret is not None and not verify_signature(
            self.secret, body, record.signature, tolerance=self.tolerance, now=self.clock()
        ):
            self._reject("bad signature")
            return JSONResponse({"error": "bad signature"}, status_code=400)
        outcome = self.script.take(record.path)
        if outcome is not None:
            self._reject(outcome.error)
            headers = {}
            if outcome.retry_after is not None:
                headers["Retry-After"] = str(outcome.retry_after)
            return JSONResponse({"error": "scripted"}, outcome.status, headers)
        with self._records:
            self.deliveries.append(record)
        return JSONResponse({})
