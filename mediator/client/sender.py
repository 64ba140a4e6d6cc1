"""What a third-party sender does: encrypt for the recipient key, wrap the envelope in a
routing/1.0 forward for each mediator hop (RFC 0094), anoncrypt it to the mediator."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any

import httpx

from mediator.client.agent import Agent
from mediator.client.transports import HttpTransport
from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair, did_key_to_verkey, normalize_key


async def mediator_key(base_url: str) -> str:
    """The mediator's verkey, read from its invitation."""
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.get(base_url.rstrip("/") + "/invitation")
        answer.raise_for_status()
    oob = answer.json()["invitation"]
    return did_key_to_verkey(oob["services"][0]["recipientKeys"][0])


def forward_envelope(
    inner: bytes, to_key: str, mediator_verkey: str, routing_keys: Sequence[str] = ()
) -> bytes:
    """Wrap `inner` (an envelope for `to_key`) for delivery through the mediator.

    `routing_keys` are further hops between the mediator and the recipient, nearest to the
    recipient last, as a mediate-grant lists them; each hop gets its own forward.
    """
    hops = [normalize_key(k) for k in routing_keys]
    current, target = inner, to_key
    for hop in reversed(hops):
        current = envelope.pack(_forward(current, target), [hop])
        target = hop
    return envelope.pack(_forward(current, target), [normalize_key(mediator_verkey)])


def _forward(inner: bytes, to: str) -> bytes:
    msg: dict[str, Any] = {
        "@type": "https://didcomm.org/routing/1.0/forward",
        "@id": str(uuid.uuid4()),
        "to": to,
        "msg": json.loads(inner),
    }
    return json.dumps(msg).encode()


class Sender(Agent):
    """An agent that sends to recipients of this mediator."""

    def __init__(self, mediator: str, keys: KeyPair | None = None) -> None:
        super().__init__(mediator, keys)

    def wrap(self, recipient_key: str, msg: dict[str, Any], *, extra: Sequence[str] = ()) -> bytes:
        """Authcrypt `msg` to the recipient (and `extra` keys), forwarded via the mediator."""
        to = normalize_key(recipient_key)
        inner = envelope.pack(json.dumps(msg).encode(), [to, *extra], self.keys)
        return forward_envelope(inner, to, self.mediator)

    async def send_to(
        self, recipient_key: str, msg: dict[str, Any], transport: HttpTransport | str
    ) -> None:
        """Send over HTTP; raises ClientError when the mediator refuses the forward."""
        own = isinstance(transport, str)
        http = HttpTransport(transport) if isinstance(transport, str) else transport
        try:
            await http.send(self.wrap(recipient_key, msg))
        finally:
            if own:
                await http.close()
