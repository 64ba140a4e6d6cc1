"""Firebase Cloud Messaging, HTTP v1 API, logged in with a service account (OAuth 2).

The access token comes from the service-account file's `token_uri` for a signed RS256
assertion (RFC 7523: iss the client email, the firebase.messaging scope, aud the token
URI, an hour at most) and is kept until a minute before it expires; a 401 from the send
endpoint drops it. Android devices get a data message (high priority, one collapse key: the
newest replaces what the phone has not shown); a device that registered as iOS through FCM
gets an APNs alert with `content-available` through FCM's `apns` block.

Error answers follow FCM's `FcmError` codes: UNREGISTERED (404) and INVALID_ARGUMENT about
the registration token (400) mean the token is gone; QUOTA_EXCEEDED (429), UNAVAILABLE
(503), INTERNAL (500) and a 401 (the access token revoked or expired early: dropped, the
retry logs in again) are retried. Anything that says the configuration is wrong
(SENDER_ID_MISMATCH: another Firebase project's token or credentials; 403; a 404 without
UNREGISTERED: a wrong project or URL) is given up and leaves the device alone, so that a
mistake in the settings never erases every phone's registration. A failed login is
remembered for a few seconds: the notifications waiting behind it are retried at once
instead of each waiting for the token endpoint in turn.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa

from mediator.errors import ConfigError
from mediator.notify.jwt import load_private_key, sign_rs256
from mediator.notify.provider import (
    CALL_ERRORS,
    PAYLOAD_TYPES,
    Notice,
    Outcome,
    by_status,
    unreachable,
)

SCOPE = "https://www.googleapis.com/auth/firebase.messaging"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ASSERTION_SECONDS = 3600
EARLY_SECONDS = 60  # a token is renewed this long before it expires
COLLAPSE_KEY = "didcomm"
LOGIN_FAILURE_SECONDS = 5.0


@dataclass(frozen=True)
class ServiceAccount:
    project_id: str
    client_email: str
    private_key_id: str
    token_uri: str
    key: rsa.RSAPrivateKey

    @classmethod
    def load(cls, path: str) -> ServiceAccount:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ConfigError(f"FCM credentials {path}: {exc}") from None
        if not isinstance(data, dict) or data.get("type") != "service_account":
            raise ConfigError(f"FCM credentials {path}: not a service-account key file")
        missing = [
            f
            for f in ("project_id", "client_email", "private_key", "token_uri")
            if not isinstance(data.get(f), str) or not data[f]
        ]
        if missing:
            raise ConfigError(f"FCM credentials {path}: missing {', '.join(missing)}")
        key = load_private_key(data["private_key"].encode(), f"FCM credentials {path}")
        if not isinstance(key, rsa.RSAPrivateKey):
            raise ConfigError(f"FCM credentials {path}: the private key must be RSA")
        return cls(
            project_id=data["project_id"],
            client_email=data["client_email"],
            private_key_id=str(data.get("private_key_id", "")),
            token_uri=data["token_uri"],
            key=key,
        )

    def assertion(self, now: float) -> str:
        header = {"kid": self.private_key_id} if self.private_key_id else {}
        claims = {
            "iss": self.client_email,
            "scope": SCOPE,
            "aud": self.token_uri,
            "iat": int(now),
            "exp": int(now) + ASSERTION_SECONDS,
        }
        return sign_rs256(self.key, header, claims)


class FcmProvider:
    name = "fcm"

    def __init__(self, account: ServiceAccount, api_url: str, http: httpx.AsyncClient) -> None:
        self.account = account
        self.url = f"{api_url.rstrip('/')}/v1/projects/{account.project_id}/messages:send"
        self.http = http
        self._token: tuple[str, float] | None = None
        self._failed: tuple[LoginFailed, float] | None = None
        self._login = asyncio.Lock()

    async def _access_token(self) -> str:
        async with self._login:  # one login at a time, whatever the notifications waiting
            now = time.time()
            if self._token is not None and self._token[1] > now:
                return self._token[0]
            if self._failed is not None and self._failed[1] > now:
                raise self._failed[0]
            try:
                answer = await self.http.post(
                    self.account.token_uri,
                    data={"grant_type": GRANT_TYPE, "assertion": self.account.assertion(now)},
                )
                token, lifetime = _grant(answer)
            except LoginFailed as failure:
                self._failed = (failure, now + LOGIN_FAILURE_SECONDS)
                raise
            self._failed = None
            self._token = (token, now + max(0.0, lifetime - EARLY_SECONDS))
            return token

    def _login_failed(self, failure: LoginFailed) -> Outcome:
        """What a failed login means for the notification: an outage is retried, not before
        the remembered failure runs out (the retries would only meet it again)."""
        answer = failure.answer
        detail = f"token endpoint: {answer.status_code} {answer.text[:200]}"
        # A 200 without a token is nonsense: an outage too.
        outcome = Outcome("retry", detail) if answer.is_success else by_status(answer, detail)
        if outcome.kind != "retry":
            return outcome
        remembered = self._failed[1] - time.time() if self._failed is not None else 0.0
        return Outcome("retry", detail, max(outcome.retry_after or 0.0, remembered))

    def message(self, notice: Notice) -> dict[str, Any]:
        data = {
            "@type": PAYLOAD_TYPES["fcm"],
            "message_count": str(notice.count),
            "notification_id": notice.notice_id,
        }
        message: dict[str, Any] = {"token": notice.device.token, "data": data}
        if notice.device.is_ios:
            message["apns"] = {
                "headers": {
                    "apns-push-type": "alert",
                    "apns-priority": "10",
                    "apns-collapse-id": COLLAPSE_KEY,
                },
                "payload": {
                    "aps": {
                        "alert": {"title": notice.title, "body": notice.body},
                        "content-available": 1,
                    }
                },
            }
        else:
            message["android"] = {"priority": "high", "collapse_key": COLLAPSE_KEY}
        return {"message": message}

    async def send(self, notice: Notice) -> Outcome:
        try:
            token = await self._access_token()
            answer = await self.http.post(
                self.url,
                json=self.message(notice),
                headers={"Authorization": f"Bearer {token}"},
            )
        except LoginFailed as exc:
            return self._login_failed(exc)
        except CALL_ERRORS as exc:
            return unreachable(exc)
        if answer.status_code == 401:
            # Revoked or expired early: dropped (unless another call renewed it already),
            # and the retry logs in again.
            if self._token is not None and self._token[0] == token:
                self._token = None
            return Outcome("retry", "401 from FCM: the access token was refused")
        return _outcome(answer)

    async def aclose(self) -> None:
        return None  # the client is the notifier's


class LoginFailed(Exception):
    def __init__(self, answer: httpx.Response) -> None:
        super().__init__(f"token endpoint answered {answer.status_code}")
        self.answer = answer


def _grant(answer: httpx.Response) -> tuple[str, float]:
    """The access token and its lifetime from the token endpoint's answer."""
    token: object = None
    lifetime = 0.0
    try:
        body = answer.json() if answer.status_code == 200 else None
        if isinstance(body, dict):
            token = body.get("access_token")
            lifetime = float(body.get("expires_in", 3600))
    except (ValueError, TypeError):
        token = None
    if not isinstance(token, str) or not token:
        raise LoginFailed(answer)
    return token, lifetime


def _error(answer: httpx.Response) -> tuple[str, str, str]:
    """FCM's error: (its status, the FcmError code, the message), empty where absent."""
    try:
        body = answer.json()
    except ValueError:
        return "", "", ""
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return "", "", ""
    code = ""
    details = error.get("details")
    for detail in details if isinstance(details, list) else []:
        if isinstance(detail, dict) and detail.get("errorCode"):
            code = str(detail["errorCode"])
    return str(error.get("status", "")), code, str(error.get("message", ""))[:200]


def _outcome(answer: httpx.Response) -> Outcome:
    if 200 <= answer.status_code < 300:
        return Outcome("sent")
    status, code, message = _error(answer)
    text = " ".join(p for p in (code or status, message) if p)
    if code == "UNREGISTERED":
        return Outcome("gone", f"{answer.status_code} {text}")
    if (
        answer.status_code == 400
        and (code or status) == "INVALID_ARGUMENT"
        and "registration token" in message.lower()
    ):
        return Outcome("gone", f"{answer.status_code} {text}")
    return by_status(answer, text)
