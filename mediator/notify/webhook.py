"""A generic webhook, for operators who run their own notifier: a JSON POST per notification,
signed so the receiver knows it is ours and fresh.

    X-Mediator-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">

The receiver recomputes the HMAC with the shared secret over the timestamp, a dot and the
raw body, compares in constant time, and rejects a timestamp older than a few minutes.
`X-Mediator-Notification` repeats the notification id (retries reuse it: deduplicate on it).
2xx is sent; 410 Gone says the device is gone (its info is removed); 429 and 5xx are
retried, honouring Retry-After; anything else is given up.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Any

import httpx
import orjson

from mediator.errors import ConfigError
from mediator.notify.provider import CALL_ERRORS, Notice, Outcome, by_status, unreachable

SIGNATURE_HEADER = "X-Mediator-Signature"
EVENT = "didcomm.messages-waiting"


def signature(secret: str, body: bytes, at: int) -> str:
    mac = hmac.new(secret.encode(), f"{at}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={mac}"


class WebhookProvider:
    name = "webhook"

    def __init__(self, url: str, secret: str, app: str, http: httpx.AsyncClient) -> None:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"notification webhook {url!r}: an http(s) URL is needed")
        if not secret:
            raise ConfigError("the notification webhook needs a secret to sign with")
        self.url = url
        self.secret = secret
        self.app = app
        self.http = http

    def payload(self, notice: Notice) -> dict[str, Any]:
        return {
            "type": EVENT,
            "id": notice.notice_id,
            "app": notice.device.app,
            "service": notice.device.service,
            "device_token": notice.device.token,
            "device_platform": notice.device.platform,
            "connection": notice.connection,
            "message_count": notice.count,
            "title": notice.title,
            "body": notice.body,
        }

    async def send(self, notice: Notice) -> Outcome:
        body = orjson.dumps(self.payload(notice))
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signature(self.secret, body, int(time.time())),
            "X-Mediator-Notification": notice.notice_id,
        }
        try:
            answer = await self.http.post(self.url, content=body, headers=headers)
        except CALL_ERRORS as exc:
            return unreachable(exc)
        if answer.status_code == 410:
            return Outcome("gone", "410 from the webhook")
        return by_status(answer, "")

    async def aclose(self) -> None:
        return None
