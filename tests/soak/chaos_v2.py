"""The chaos soak's DIDComm v2 wallets (tests/soak/chaos.py): each a did:peer:2 mediated
with coordinate-mediation 2.0, live with Pickup 3.0 on a WebSocket to a random node, every
`delivery` acknowledged with messages-received (counted as acknowledged once the status
answering it arrives: a node killed before it deleted them offers them again); when its
socket drops, a new socket to a live node and live mode again (3.0's live mode delivers what
waited meanwhile). Forwards to them are routing 2.0 forwards of messages anoncrypted to
their DIDs."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Callable
from typing import Any

import httpx
import orjson
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import WebSocketException

from mediator.client.identity_v2 import IdentityV2
from mediator.didcomm.v2.unpack import pack, unpack
from tests.soak.history import History

ENCRYPTED = {"content-type": "application/didcomm-encrypted+json"}
ORG = "https://didcomm.org/"
FAILURES = (OSError, ConnectionError, WebSocketException, TimeoutError, httpx.HTTPError)


def message(name: str, body: dict[str, Any], **headers: Any) -> dict[str, Any]:
    return {"id": uuid.uuid4().hex, "type": ORG + name, "body": body, **headers}


async def mediator_did(base: str) -> str:
    async with httpx.AsyncClient(timeout=10) as client:
        return str((await client.get(base + "/v2/invitation")).json()["did"])


def forward_of(mediator: str, to: str, content: dict[str, Any]) -> bytes:
    """A v2 sender's forward of `content` to the wallet `to`, anoncrypted to the mediator."""
    inner = pack(message("basicmessage/2.0/message", {"content": content}), to)
    outer = message("routing/2.0/forward", {"next": to}, to=[mediator])
    outer["attachments"] = [{"id": "1", "data": {"json": inner}}]
    return orjson.dumps(pack(outer, mediator))


class WalletV2:
    """One live v2 recipient that survives its node's death."""

    def __init__(
        self,
        any_base: Callable[[], str],
        mediator: str,
        history: History,
        seen: set[int],
        sender: str,
    ) -> None:
        self.any_base, self.mediator, self.history, self.seen = any_base, mediator, history, seen
        self.sender = sender
        identity = IdentityV2.make()
        self.key = self.did = identity.did
        self.agreement = identity.agreement
        self.socket: ClientConnection | None = None
        self.stopping = False
        self.reconnects = 0
        self._acks: dict[str, list[str]] = {}  # messages-received's id -> the ids it acknowledged

    def pack(self, content: dict[str, Any]) -> bytes:
        content = {"from": self.did, "to": [self.mediator], "return_route": "all", **content}
        sender = (f"{self.did}#key-1", self.agreement)
        return orjson.dumps(pack(content, self.mediator, sender=sender))

    def open(self, data: bytes | str) -> dict[str, Any]:
        return unpack(orjson.loads(data), {f"{self.did}#key-1": self.agreement}.get).message

    async def setup(self) -> None:
        update = {"updates": [{"recipient_did": self.did, "action": "add"}]}
        async with httpx.AsyncClient(timeout=10) as client:
            for name, body in (("mediate-request", {}), ("keylist-update", update)):
                sealed = self.pack(message(f"coordinate-mediation/2.0/{name}", body))
                answer = await client.post(self.any_base() + "/", content=sealed, headers=ENCRYPTED)
                answer.raise_for_status()
        await self._go_live()

    async def _go_live(self) -> None:
        socket = await connect(self.any_base().replace("http", "ws", 1) + "/", open_timeout=5)
        live = message("messagepickup/3.0/live-delivery-change", {"live_delivery": True})
        await socket.send(self.pack(live).decode())
        self.socket = socket

    def _take(self, delivery: dict[str, Any], *, last: bool = False) -> list[str]:
        ids = []
        for attachment in delivery.get("attachments") or []:
            mid = attachment["id"]
            content = self.open(orjson.dumps(attachment["data"]["json"]))["body"]["content"]
            seq = int(content["seq"])
            self.seen.add(seq)
            self.history.delivered(self.key, mid, str(content["sender"]), seq)
            ids.append(mid)
        return ids

    async def run(self) -> None:
        while not self.stopping:
            socket = self.socket
            assert socket is not None
            try:
                frame = await asyncio.wait_for(socket.recv(), 1.0)
            except TimeoutError:
                continue
            except FAILURES:
                await self._reconnect()
                continue
            try:
                got = self.open(frame)
            except Exception:  # an error frame (JSON, not a message): the node is going
                continue
            if not got["type"].endswith("/delivery"):
                # A status: the answer to a messages-received (its thread) means deleted.
                for mid in self._acks.pop(str(got.get("thid")), []):
                    self.history.acknowledged(self.key, mid)
                continue
            ids = self._take(got)
            ack = message("messagepickup/3.0/messages-received", {"message_id_list": ids})
            self._acks[ack["id"]] = ids
            try:
                await socket.send(self.pack(ack).decode())
            except FAILURES:
                await self._reconnect()
                continue

    async def _reconnect(self) -> None:
        self.reconnects += 1
        self._acks.clear()  # unanswered: maybe deleted, maybe offered again
        if self.socket is not None:
            with contextlib.suppress(Exception):
                await self.socket.close()
        while not self.stopping:
            try:
                await self._go_live()
                return
            except FAILURES:
                await asyncio.sleep(0.3)

    async def finish(self) -> None:
        """A last pickup round over HTTP through a live node."""
        self.stopping = True
        if self.socket is not None:
            with contextlib.suppress(Exception):
                await self.socket.close()
        for _ in range(20):
            try:
                async with httpx.AsyncClient(timeout=10) as client:
                    while True:
                        ask = message("messagepickup/3.0/delivery-request", {"limit": 50})
                        answer = await client.post(
                            self.any_base() + "/", content=self.pack(ask), headers=ENCRYPTED
                        )
                        answer.raise_for_status()
                        got = self.open(answer.content)
                        if not got["type"].endswith("/delivery"):
                            return
                        ids = self._take(got, last=True)
                        ack = message(
                            "messagepickup/3.0/messages-received", {"message_id_list": ids}
                        )
                        answer = await client.post(
                            self.any_base() + "/", content=self.pack(ack), headers=ENCRYPTED
                        )
                        answer.raise_for_status()
                        for mid in ids:
                            self.history.acknowledged(self.key, mid)
            except FAILURES:
                await asyncio.sleep(0.3)
