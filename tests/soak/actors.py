"""The soaks' actors, each writing what it saw into a History (tests/soak/history.py):
recipients that pick up live over a WebSocket, by polling over HTTP, or from pushes to an
endpoint of their own, and senders that forward one content at a time.

Every content is `{"sender": <id>, "seq": <n>}`, so the checker can tell lost, duplicated
and reordered messages apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from websockets.exceptions import ConnectionClosed

from mediator.client import ClientError, Recipient, Sender, WsConnection, attachments
from tests.didcomm_peer import ENVELOPE, LIVE, Peer
from tests.soak.history import History

ERRORS = (ClientError, OSError, ConnectionError, TimeoutError, httpx.HTTPError, ConnectionClosed)


@dataclass
class Socket:
    """One WebSocket a live wallet opened: where, and how it ended."""

    base: str
    conn: WsConnection | None
    opened: float
    replaced: float | None = None  # when the wallet's next socket went live
    deliveries_after_replaced: int = 0

    @property
    def close_code(self) -> int | None:
        return None if self.conn is None else self.conn.close_code


class Wallet:
    """A recipient with one connection and one registered key."""

    def __init__(self, name: str, med: str, history: History) -> None:
        self.name, self.med, self.history = name, med, history
        self.key = ""
        self.peer: Peer | None = None
        self.stopping = False
        self.paused = False  # neither fetching nor acknowledging (to fill Redis up)
        self.seen = 0
        self.errors = 0  # pickups or sockets that failed

    def _like(self, base: str, transport: str) -> Peer:
        old = self.peer
        assert old is not None
        peer = Peer(base, self.med, transport)
        peer.keys, peer.mediator = old.keys, old.mediator
        peer.recipient_keys = old.recipient_keys
        return peer

    async def setup(self, base: str, transport: str = "http") -> None:
        peer = Peer(base, self.med, transport)
        if transport == "ws":
            await peer.connect()
        await peer.exchange()
        self.key = await peer.mediate()
        self.peer = peer

    def take(self, peer: Peer, reply: dict[str, Any]) -> list[str]:
        ids = []
        for mid, body in attachments(reply):
            content = peer.open(body)
            self.history.delivered(self.key, mid, str(content["sender"]), int(content["seq"]))
            self.seen += 1
            ids.append(mid)
        return ids

    async def ack(self, peer: Peer, ids: list[str]) -> None:
        await peer.ack(ids)  # answered: deleted
        for mid in ids:
            self.history.acknowledged(self.key, mid)

    async def pickup_round(self, peer: Peer) -> None:
        """`delivery-request` and `messages-received` until the queue is empty."""
        while not self.paused:
            ids = self.take(peer, await peer.deliver())
            if not ids:
                return
            await self.ack(peer, ids)

    async def finish(self, bases: list[str]) -> None:
        """A last pickup round over HTTP, as the wallet's next poll would be."""
        self.stopping, self.paused = True, False
        for attempt in range(30):
            peer = self._like(bases[attempt % len(bases)], "http")
            try:
                await self.pickup_round(peer)
                return
            except ERRORS:
                await asyncio.sleep(0.3)
            finally:
                await peer.close()


class LiveWallet(Wallet):
    """Live mode on a WebSocket, every delivery acknowledged; when the socket closes, a new
    one on a node `choose` names, a pickup round, and live mode again (as Credo does)."""

    def __init__(self, name: str, med: str, history: History, choose: Callable[[], str]) -> None:
        super().__init__(name, med, history)
        self.choose = choose
        self.sockets: list[Socket] = []
        self.pending: list[str] = []  # delivered, to acknowledge (held while paused)

    def _opened(self, peer: Peer, base: str) -> None:
        loop = asyncio.get_running_loop()
        if self.sockets:
            self.sockets[-1].replaced = loop.time()
        self.sockets.append(Socket(base, peer.ws.connection, loop.time()))

    async def setup(self, base: str, transport: str = "ws") -> None:
        await super().setup(base, "ws")
        assert self.peer is not None
        await self.peer.send(dict(LIVE, **{"@id": Recipient.new_id()}))
        self._opened(self.peer, base)

    @property
    def socket(self) -> Socket:
        return self.sockets[-1]

    async def ack(self, peer: Peer, ids: list[str]) -> None:
        """Frames that arrived before the acknowledgement's answer (a re-offer sent before
        the mediator deleted them) are recorded before it, as the mediator sent them."""
        await peer.ack(ids)
        while not peer.inbox.empty():
            frame = peer.inbox.get_nowait()
            try:
                self.pending += self.take(peer, peer.open_forwarded(frame))
            except Exception:  # a JSON error frame, or not a delivery
                continue
        for mid in ids:
            self.history.acknowledged(self.key, mid)

    async def run(self) -> None:
        while not self.stopping:
            peer, socket = self.peer, self.socket
            assert peer is not None
            if peer.ws.connection is not socket.conn:
                # Closed, or (the client sends on a new socket of its own when the old one
                # is gone) replaced by a socket without live mode: reconnect as a wallet does.
                self.errors += socket.close_code not in (1012, 1013)
                await self.reconnect()
                continue
            try:
                delivery: dict[str, Any] | None = await peer.next_message(wait=1.0)
            except TimeoutError:
                delivery = None
            except ERRORS:
                self.errors += 1
                await self.reconnect()
                continue
            try:
                if delivery is not None:
                    if socket.replaced is not None:
                        socket.deliveries_after_replaced += 1
                    self.pending += self.take(peer, delivery)
                if self.pending and not self.paused:
                    ids, self.pending = self.pending, []
                    await self.ack(peer, sorted(set(ids)))
            except ERRORS:
                self.errors += 1
                await self.reconnect()

    async def reconnect(self) -> None:
        old = self.peer
        assert old is not None
        with contextlib.suppress(Exception):
            await old.close()
        self.pending = []  # offered again once the old socket is gone
        while not self.stopping:
            base = self.choose()
            peer = self._like(base, "ws")
            try:
                await peer.connect()
                await self.pickup_round(peer)
                await peer.send(dict(LIVE, **{"@id": Recipient.new_id()}))
                self.peer = peer
                self._opened(peer, base)
                return
            except ERRORS:
                with contextlib.suppress(Exception):
                    await peer.close()
                await asyncio.sleep(0.3)


class PollingWallet(Wallet):
    """Picks up over HTTP every `every` seconds, through a node `choose` names."""

    def __init__(
        self, name: str, med: str, history: History, choose: Callable[[], str], every: float
    ) -> None:
        super().__init__(name, med, history)
        self.choose, self.every = choose, every

    async def run(self) -> None:
        while not self.stopping:
            if not self.paused:
                peer = self._like(self.choose(), "http")
                try:
                    await self.pickup_round(peer)
                except ERRORS:
                    self.errors += 1
                finally:
                    await peer.close()
            await asyncio.sleep(self.every * random.uniform(0.8, 1.2))


@dataclass
class Sent:
    """What the forwards were answered."""

    statuses: Counter[int] = field(default_factory=Counter)
    bodies: dict[int, str] = field(default_factory=dict)  # one body for each status but 202
    unanswered: int = 0
    by_base: dict[str, Counter[int]] = field(default_factory=dict)


class Forwarder:
    """One sequential sender: a forward, its answer, the next. A 202 is accepted; an error
    without an answer may have been stored (`unanswered`). With `maybe_stored` a 503 counts
    as unanswered too: a node whose Redis call timed out cannot know whether it ran."""

    def __init__(
        self,
        name: str,
        med: str,
        history: History,
        sent: Sent,
        *,
        size: int = 0,
        maybe_stored: bool = False,
        timeout: float = 15.0,
    ) -> None:
        self.name, self.history, self.sent = name, history, sent
        self.sender = Sender(med)
        self.pad = "x" * size
        self.maybe_stored = maybe_stored
        self.client = httpx.AsyncClient(timeout=timeout)
        self.seq = 0

    async def forward(self, base: str, wallet: Wallet) -> int | None:
        """One forward of the next content to `wallet` through `base`: its status."""
        self.seq += 1
        seq = self.seq
        content: dict[str, Any] = {"sender": self.name, "seq": seq}
        if self.pad:
            content["pad"] = self.pad
        data = self.sender.wrap(wallet.key, content)
        try:
            answer = await self.client.post(base + "/", content=data, headers=ENVELOPE)
        except httpx.HTTPError:
            self.sent.unanswered += 1
            self.history.unanswered(self.name, seq, wallet.key)
            return None
        status = answer.status_code
        self.sent.statuses[status] += 1
        self.sent.by_base.setdefault(base, Counter())[status] += 1
        if status == 202:
            self.history.accepted(self.name, seq, wallet.key)
        else:
            self.sent.bodies.setdefault(status, answer.text[:300])
            if status == 503 and self.maybe_stored:
                self.history.unanswered(self.name, seq, wallet.key)
        return status

    async def run(
        self,
        wallets: list[Wallet],
        choose: Callable[[], str],
        until: asyncio.Event,
        rate: float,
    ) -> None:
        """Forwards at about `rate` a second (as fast as answered, if slower) until `until`.
        The times are kept on a schedule, so a slow answer is made up by the next forwards
        going at once; at most a second's worth is made up."""
        loop = asyncio.get_running_loop()
        gap = 1 / rate
        due = loop.time()
        while not until.is_set():
            await self.forward(choose(), random.choice(wallets))
            now = loop.time()
            due = max(due + gap, now - 1.0)
            await asyncio.sleep(max(0.0, due - now))

    async def aclose(self) -> None:
        await self.client.aclose()


class PushedWallet(Wallet):
    """An agent with an HTTP endpoint of its own (as ACA-Py): DID Exchange with the endpoint
    in its did:peer:2, and every message pushed there. A push carries no message id: the
    content names it, and a 2xx answer is the acknowledgement."""

    def __init__(self, name: str, med: str, history: History, endpoint_url: str) -> None:
        super().__init__(name, med, history)
        self.url = endpoint_url
        self.inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self.ready = False

    def pushed(self, body: bytes) -> None:
        """The endpoint got `body` (and answers 2xx)."""
        if not self.ready:
            self.inbox.put_nowait(body)
            return
        assert self.peer is not None
        content = self.peer.open(body)
        sender, seq = str(content["sender"]), int(content["seq"])
        mid = f"{sender}#{seq}"
        self.history.delivered(self.key, mid, sender, seq)
        self.history.acknowledged(self.key, mid)
        self.seen += 1

    async def _reply(self, step: str, wait: float = 30.0) -> dict[str, Any]:
        assert self.peer is not None
        try:
            return self.peer.open(await asyncio.wait_for(self.inbox.get(), wait))
        except TimeoutError:
            raise TimeoutError(f"{self.name}: no {step} pushed within {wait} s") from None

    async def setup(self, base: str, transport: str = "http") -> None:
        from mediator.didcomm.did_peer import numalgo2_did

        peer = Peer(base, self.med)
        self.peer = peer
        request = peer.message(
            "didexchange/1.1/request", route=None, label=self.name,
            did=numalgo2_did(peer.keys, [self.url]),
        )  # fmt: skip
        await peer.send(request)
        peer.take_response(await self._reply("DID Exchange response"))
        await peer.send(peer.message("coordinate-mediation/1.0/mediate-request", route=None))
        peer.grant = await self._reply("mediate-grant")
        self.key = peer.add_key()
        update = [{"recipient_key": peer.recipient_keys[self.key].did_key, "action": "add"}]
        await peer.send(
            peer.message("coordinate-mediation/1.0/keylist-update", route=None, updates=update)
        )
        await self._reply("keylist-update-response")
        self.ready = True

    async def finish(self, bases: list[str]) -> None:
        self.stopping = True  # nothing to pick up: what is not pushed yet waits for a retry
