"""The project's client (mediator.client) as the test suites use it: a recipient with raw
access to its transports, and a third-party sender's forward.

Each takes the node it talks to as its base URL (real sockets: a `mediator serve` process)
or as anything with `base`, `client()` and `open_websocket` (tests/inprocess.py's AppNode,
the app in this process)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from mediator.client import (
    Recipient,
    Sender,
    WsConnection,
    attachments,
    connect_websocket,
    message,
)
from mediator.client import mediator_key as key_of
from mediator.client.transports import ENVELOPE_TYPE
from mediator.didcomm.keys import KeyPair

ENVELOPE = {"content-type": ENVELOPE_TYPE}

__all__ = [
    "ENVELOPE",
    "Peer",
    "Reach",
    "attachments",
    "collect",
    "connected_peer",
    "forward",
    "live_peer",
    "mediator_key",
    "message",
    "reach",
]

LIVE = message("messagepickup/2.0/live-delivery-change", live_delivery=True)


class Reach(Protocol):
    """How the tests reach a node: its public base URL, HTTP, and its WebSocket."""

    @property
    def base(self) -> str: ...

    def client(self, timeout: float = 30) -> httpx.AsyncClient: ...

    async def open_websocket(self, url: str) -> WsConnection: ...


@dataclass(frozen=True)
class Remote:
    """A node at a URL, over real sockets."""

    base: str

    def client(self, timeout: float = 30) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base, timeout=timeout)

    async def open_websocket(self, url: str) -> WsConnection:
        return await connect_websocket(url)


def reach(node: str | Reach) -> Reach:
    return Remote(node) if isinstance(node, str) else node


async def mediator_key(node: str | Reach) -> str:
    """The node's mediator verkey, from its invitation."""
    target = reach(node)
    async with target.client() as client:
        return await key_of(target.base, client=client)


class Peer(Recipient):
    """A recipient whose tests also send raw bytes and look at raw frames and answers."""

    def __init__(self, node: str | Reach, mediator: str, transport: str = "http") -> None:
        self.node = reach(node)
        self.web = self.node.client(30)
        super().__init__(
            self.node.base,
            mediator,
            transport,
            client=self.web,
            connector=self.node.open_websocket,
        )

    async def __aenter__(self) -> Peer:
        await super().__aenter__()
        await self.exchange()  # the suites' peers are connected, as a wallet would be
        return self

    async def close(self) -> None:
        await super().close()
        await self.web.aclose()

    async def connect(self) -> None:
        await self.ws.connect()

    async def disconnect(self) -> None:
        await self.ws.close()

    async def post(self, data: bytes) -> httpx.Response:
        return await self.web.post("/", content=data, headers=ENVELOPE)

    async def no_frame(self, seconds: float) -> bool:
        try:
            await self.ws.receive(seconds)
        except TimeoutError:
            return True
        return False

    async def send_raw(self, msg: dict[str, Any], *, anon: bool = False) -> None:
        await self.ws.send(self.pack(msg, anon=anon))


class _Connected(Peer):
    async def __aenter__(self) -> Peer:
        await Recipient.__aenter__(self)
        return self


def connected_peer(
    node: str | Reach,
    mediator: str,
    keys: KeyPair,
    transport: str = "http",
    recipient_seeds: Sequence[bytes] = (),
) -> Peer:
    """A wallet that has its connection already (imported from another mediator, say): its
    key `keys`, the mediator's key on the connection `mediator`, its recipient keys' seeds;
    no exchange on entering."""
    peer = _Connected(node, mediator, transport)
    peer.keys = keys
    for seed in recipient_seeds:
        pair = KeyPair.from_seed(seed)
        peer.recipient_keys[pair.verkey_b58] = pair
    return peer


async def forward(
    node: str | Reach,
    mediator: str,
    to: str,
    content: dict[str, Any],
    *,
    extra_kids: tuple[str, ...] = (),
) -> httpx.Response:
    """What a third-party sender does, keeping the mediator's raw HTTP answer."""
    data = Sender(mediator).wrap(to, content, extra=extra_kids)
    async with reach(node).client() as client:
        return await client.post("/", content=data, headers=ENVELOPE)


async def live_peer(node: str | Reach, med: str, like: Recipient | None = None) -> Peer:
    """A WebSocket recipient of `node` in live mode: a new connection granted mediation
    with a registered key (`recipient_keys`), or `like`'s connection again."""
    peer = Peer(node, med, "ws")
    await peer.connect()
    if like is None:
        await peer.exchange()
        await peer.mediate()
    else:
        peer.keys, peer.mediator = like.keys, like.mediator
        peer.recipient_keys = like.recipient_keys
    status = await peer.send(dict(LIVE, **{"@id": Recipient.new_id()}))
    assert status is not None and status["live_delivery"] is True
    return peer


async def collect(peer: Peer, want: int, seen: dict[str, Any], wait: float = 10) -> None:
    """Read deliveries until `want` distinct message ids were seen (id -> opened message);
    acknowledge each."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    while len(seen) < want and loop.time() < deadline:
        try:
            delivery = await peer.next_message(wait=max(0.1, deadline - loop.time()))
        except TimeoutError:
            break
        items = attachments(delivery)
        for mid, body in items:
            seen.setdefault(mid, peer.open(body))
        await peer.ack([mid for mid, _ in items])
