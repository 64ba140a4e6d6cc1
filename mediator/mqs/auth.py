"""Bearer tokens for the mqs API, and the loopback-only rule when none is configured."""

from __future__ import annotations

import hmac
import ipaddress

from starlette.requests import Request

from mediator.errors import RequestError
from mediator.settings import MqsSettings


def served(settings: MqsSettings, host: str) -> bool:
    """Without a token the mqs API is open, so it is only served on loopback."""
    return bool(settings.tokens) or _loopback(host)


def _loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check(request: Request, settings: MqsSettings, *, served: bool) -> None:
    if not served:
        raise RequestError(
            "the mqs API is disabled: no MEDIATOR_API_TOKENS are configured and the node "
            "listens on a non-loopback address",
            status=403,
        )
    tokens = settings.tokens
    if not tokens:
        return
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    given = given.strip()
    if scheme.lower() != "bearer" or not given:
        raise RequestError("a bearer token is required", status=401)
    if not any(hmac.compare_digest(given.encode(), t.encode()) for t in tokens):
        raise RequestError("the bearer token is not valid", status=401)
