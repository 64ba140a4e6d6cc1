"""Routing 2.0 `forward` (https://didcomm.org/routing/2.0/forward): what a mediator reads
of it. `next` names the recipient (a DID, a DID URL of one of its keys, or a key as
did:key); each attachment is a message for it, as JSON (`data.json`) or base64url
(`data.base64`). `expires_time` (seconds) is honoured by the caller: an expired forward is
not queued. `please_ack` is never honoured (the spec forbids it on forwards) and
`delay_milli` is not supported (delivery is never delayed on purpose).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from mediator.didcomm.envelope import b64url_decode
from mediator.errors import EnvelopeError, ProblemReport

TYPE = "https://didcomm.org/routing/2.0/forward"
MAX_ATTACHMENTS = 32


@dataclass(frozen=True)
class Forward:
    next: str
    payloads: tuple[bytes, ...]  # each attached message, as JSON bytes
    expires_time: int | None  # seconds since the epoch

    def expired(self, now_seconds: float) -> bool:
        return self.expires_time is not None and self.expires_time <= now_seconds


def read(message: dict[str, Any]) -> Forward:
    """The forward in plaintext `message`; ProblemReport (invalid-request, status 400)
    for what cannot be forwarded."""
    body = message.get("body") or {}
    target = body.get("next") if isinstance(body, dict) else None
    if not isinstance(target, str) or not target or len(target) > 16_384:
        raise _invalid("a forward's body names its recipient in next")
    attachments = message.get("attachments")
    if not isinstance(attachments, list) or not attachments:
        raise _invalid("a forward carries its message as an attachment")
    if len(attachments) > MAX_ATTACHMENTS:
        raise _invalid(f"a forward carries at most {MAX_ATTACHMENTS}")
    payloads = tuple(_payload(a) for a in attachments)
    expires = message.get("expires_time")
    if expires is not None and (isinstance(expires, bool) or not isinstance(expires, int)):
        raise _invalid("expires_time is whole seconds since the epoch")
    return Forward(target, payloads, expires)


def _payload(attachment: Any) -> bytes:
    data = attachment.get("data") if isinstance(attachment, dict) else None
    if not isinstance(data, dict):
        raise _invalid("a forward's attachment has data")
    if isinstance(data.get("json"), dict):
        return orjson.dumps(data["json"])
    if "base64" in data:
        try:
            raw = b64url_decode(data["base64"], "the attachment")
        except EnvelopeError as exc:
            raise _invalid(str(exc)) from exc
        try:
            if isinstance(orjson.loads(raw), dict):
                return raw
        except orjson.JSONDecodeError:
            pass
        raise _invalid("a forwarded message is a JSON object")
    if "links" in data:
        raise _invalid("attachments by link are not forwarded")
    raise _invalid("a forward's attachment holds json or base64")


def _invalid(description: str) -> ProblemReport:
    """A forward refused: 400 to an anonymous sender, a problem-report to a known one."""
    return ProblemReport("invalid-request", description, status=400)
