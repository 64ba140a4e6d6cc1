"""Apple Push Notification service over HTTP/2, with token-based authentication.

The provider token is an ES256 JWT (header: the key id; claims: the team id and the time)
signed with the .p8 auth key; Apple wants it renewed at most every 20 minutes and refuses
it after an hour, so it is kept 40 minutes. A notification is an alert (title and body
from the settings, `content-available` so the wallet may fetch in the background) with one
collapse id, so a phone shows only the newest; `apns-expiration` a day out.

Answers follow Apple's reasons: 410 Unregistered and 400 BadDeviceToken or
DeviceTokenNotForTopic mean the token is gone; 403 ExpiredProviderToken renews the token
and retries; 429 and 5xx are retried.
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
from mediator.notify.provider import PAYLOAD_TYPES, Notice, Outcome, by_status, unreachable

HOSTS = {
    "production": "https://api.push.apple.com",
    "sandbox": "https://api.sandbox.push.apple.com",
}
TOKEN_SECONDS = 40 * 60
EXPIRATION_SECONDS = 86_400
COLLAPSE_ID = "didcomm"
GONE_REASONS = {"Unregistered", "BadDeviceToken", "DeviceTokenNotForTopic"}
RENEW_REASONS = {"ExpiredProviderToken", "InvalidProviderToken"}


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

    def _provider_token(self, *, renew: bool = False) -> str:
        now = time.time()
        if renew or self._token is None or self._token[1] <= now:
            self._token = (self.key.token(now), now + TOKEN_SECONDS)
        return self._token[0]

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
        outcome = Outcome("refused")
        for renew in (False, True):  # once more with a new token if Apple refused the old
            try:
                answer = await self.http.post(
                    url,
                    json=self.payload(notice),
                    headers=self.headers(notice, self._provider_token(renew=renew)),
                )
            except (httpx.HTTPError, OSError) as exc:
                return unreachable(exc)
            reason = _reason(answer)
            if answer.status_code == 403 and reason in RENEW_REASONS and not renew:
                continue
            if answer.status_code == 410 or reason in GONE_REASONS:
                return Outcome("gone", f"{answer.status_code} {reason}")
            outcome = by_status(answer, reason)
            break
        return outcome

    async def aclose(self) -> None:
        return None  # the client is the notifier's


def _reason(answer: httpx.Response) -> str:
    if 200 <= answer.status_code < 300:
        return ""
    try:
        return str(answer.json().get("reason", ""))[:100]
    except (ValueError, AttributeError):
        return ""
