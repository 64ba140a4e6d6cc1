"""What a third-party sender does (RFC 0094): encrypt for the recipient key, wrap the
envelope in a `routing/1.0/forward` for each hop, the outermost anoncrypted to the mediator."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from mediator.client.agent import Agent
from mediator.client.transports import HttpTransport, Transport, WsTransport
from mediator.didcomm.forwarding import wrap
from mediator.didcomm.keys import KeyPair, normalize_key


def forward_envelope(
    inner: bytes, to_key: str, mediator_verkey: str, routing_keys: Sequence[str] = ()
) -> bytes:
    """Wrap `inner`, an envelope for `to_key`, for delivery through the mediator.

    `routing_keys` are the recipient's routing keys as a DID document lists them, the one
    nearest the recipient first (RFC 0067, as ACA-Py and Credo read them): each wraps the
    forward before it, and the mediator's forward is the outermost. When the list already
    ends with the mediator's key (a grant's `routing_keys`) it is not wrapped twice.
    """
    mediator = normalize_key(mediator_verkey)
    hops = [normalize_key(k) for k in routing_keys]
    if not hops or hops[-1] != mediator:
        hops.append(mediator)
    return wrap(inner, to_key, hops)


class Sender(Agent):
    """An agent that sends to recipients of this mediator."""

    def __init__(self, mediator: str, keys: KeyPair | None = None) -> None:
        super().__init__(mediator, keys)

    def wrap(
        self,
        recipient_key: str,
        message: dict[str, Any],
        *,
        extra: Sequence[str] = (),
        routing_keys: Sequence[str] = (),
    ) -> bytes:
        """`message` authcrypted to the recipient key (and any `extra` recipients of the
        same envelope), forwarded via the mediator."""
        to = normalize_key(recipient_key)
        inner = self.pack(message, [to, *extra])
        return forward_envelope(inner, to, self.mediator, routing_keys)

    async def send_to(
        self,
        recipient_key: str,
        message: dict[str, Any],
        transport: Transport | str,
        *,
        routing_keys: Sequence[str] = (),
        client: httpx.AsyncClient | None = None,
    ) -> None:
        """Send through the mediator (a transport, or its HTTP URL, reached through `client`
        when given). Over HTTP a refused forward raises ClientError; on a WebSocket refusals
        arrive as frames."""
        data = self.wrap(recipient_key, message, routing_keys=routing_keys)
        if isinstance(transport, str):
            async with HttpTransport(transport, client=client) as http:
                await http.send(data)
        elif isinstance(transport, WsTransport):
            if not transport.connected:
                await transport.connect()
            await transport.send(data)
        else:
            await transport.send(data)
