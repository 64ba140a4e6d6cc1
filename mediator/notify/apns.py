"""Apple Push Notification service over HTTP/2, with token-based authentication.

The provider token is an ES256 JWT (header: the key id; claims: the team id and the time)
signed with the .p8 auth key; Apple wants it renewed at most every 20 minutes and refuses
it after an hour, so it is kept 40 minutes. A notification is an alert (title and body
from the settings, `content-available` so the wallet may fetch in the background) with one
collapse id, so a phone shows only the newest; `apns-expiration` a day out.

Answers follow Apple's reasons: 410 Unregistered means the token is gone; 403
ExpiredProviderToken or InvalidProviderToken renews the provider token (once, and only if
no other call renewed it meanwhile: Apple refuses renewals more often than every 20
minutes) and tries again; 429, 5xx and 400 IdleTimeout are retried. BadDeviceToken and
DeviceTokenNotForTopic are given up but leave the device alone: a wrong environment
(sandbox or production) or topic answers them for every phone, and a settings mistake must
not erase every registration.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric import ec

from mediator.errors import ConfigError
from mediator.notify.jwt import load_private_key, sign_es256
from mediator.notify.provider import (
    CALL_ERRORS,
    PAYLOAD_TYPES,
    Notice,
    Outcome,
    by_status,
    unreachable,
)

HOSTS = {
    "production": "https://api.push.apple.com",
    "sandbox": "https://api.sandbox.push.apple.com",
}
TOKEN_SECONDS = 40 * 60
EXPIRATION_SECONDS = 86_400
COLLAPSE_ID = "didcomm"
RENEW_REASONS = {"ExpiredProviderToken", "InvalidProviderToken"}
RETRY_REASONS = {"IdleTimeout"}


@dataclass(frozen=True)
class ApnsKey:
    key_id: str
    team_id: str
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def load(cls, path: str, key_id: str, team_id: str) -> ApnsKey:
        if not key_id or not team_id:
            raise ConfigError("APNs needs the key id and the team id with the .p8 key")
        try:
            pem = Path(path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"APNs key {path}: {exc}") from None
        key = load_private_key(pem, f"APNs key {path}")
        if not isinstance(key, ec.EllipticCurvePrivateKey) or key.curve.name != "secp256r1":
            raise ConfigError(f"APNs key {path}: an EC P-256 key (.p8) is needed")
        return cls(key_id, team_id, key)

    def token(self, now: float) -> str:
        return sign_es256(self.key, {"kid": self.key_id}, {"iss": self.team_id, "iat": int(now)})


class ApnsProvider:
    name = "apns"

    def __init__(
        self, key: ApnsKey, topic: str, environment: str, api_url: str, http: httpx.AsyncClient
    ) -> None:
        if not topic:
            raise ConfigError("APNs needs the app's topic (its bundle id)")
        if environment not in HOSTS:
            raise ConfigError(f"APNs environment {environment!r}: production or sandbox")
        self.key = key
        self.topic = topic
        self.base = (api_url or HOSTS[environment]).rstrip("/")
        self.http = http  # an HTTP/2 client: APNs speaks nothing else
        self._token: tuple[str, float] | None = None

    def _provider_token(self, *, refused: str = "") -> str:
        """The current provider token; a new one when it is old, or when Apple refused
        `refused` and it is still the current one."""
        now = time.time()
        current = self._token
        if current is None or current[1] <= now or (refused and current[0] == refused):
            current = self._token = (self.key.token(now), now + TOKEN_SECONDS)
        return current[0]

    def payload(self, notice: Notice) -> dict[str, Any]:
        return {
            "aps": {
                "alert": {"title": notice.title, "body": notice.body},
                "content-available": 1,
            },
            "@type": PAYLOAD_TYPES["apns"],
            "message_count": notice.count,
        }

    def headers(self, notice: Notice, token: str) -> dict[str, str]:
        return {
            "authorization": f"bearer {token}",
            "apns-topic": self.topic,
            "apns-push-type": "alert",
            "apns-priority": "10",
            "apns-collapse-id": COLLAPSE_ID,
            "apns-expiration": str(int(time.time()) + EXPIRATION_SECONDS),
            "apns-id": notice.notice_id,
        }

    async def send(self, notice: Notice) -> Outcome:
        url = f"{self.base}/3/device/{notice.device.token}"
        refused = ""
        for _ in range(2):  # once more with a new token if Apple refused the one used
            token = self._provider_token(refused=refused)
            try:
                answer = await self.http.post(
                    url, json=self.payload(notice), headers=self.headers(notice, token)
                )
            except CALL_ERRORS as exc:
                return unreachable(exc)
            reason = _reason(answer)
            if answer.status_code == 403 and reason in RENEW_REASONS and not refused:
                refused = token
                continue
            if answer.status_code == 410 or reason == "Unregistered":
                return Outcome("gone", f"{answer.status_code} {reason}")
            if reason in RETRY_REASONS:
                return Outcome("retry", f"{answer.status_code} {reason}")
            return by_status(answer, reason)
        return Outcome("refused", f"{answer.status_code} {reason} with a new provider token")

    async def aclose(self) -> None:
        return None  # the client is the notifier's


def _reason(answer: httpx.Response) -> str:
    if 200 <= answer.status_code < 300:
        return ""
    try:
        return str(answer.json().get("reason", ""))[:100]
    except (ValueError, AttributeError):
        return ""
