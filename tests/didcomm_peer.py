"""A test agent speaking to a real node over HTTP or a WebSocket, one message at a time."""

from __future__ import annotations

import asyncio
import base64
import json
import uuid
from typing import Any

import httpx
import websockets

from mediator.didcomm import envelope
from mediator.didcomm.keys import KeyPair, did_key_to_verkey

ENVELOPE = {"content-type": "application/didcomm-envelope-enc"}


def message(suffix: str, route: str | None = "all", **fields: Any) -> dict[str, Any]:
    prefix = "" if suffix.startswith(("https://", "did:sov:")) else "https://didcomm.org/"
    out: dict[str, Any] = {"@type": prefix + suffix, "@id": str(uuid.uuid4()), **fields}
    if route is not None:
        out["~transport"] = {"return_route": route}
    return out


async def mediator_key(base: str) -> str:
    async with httpx.AsyncClient(base_url=base) as client:
        oob = (await client.get("/invitation")).json()["invitation"]
    return did_key_to_verkey(oob["services"][0]["recipientKeys"][0])


class Peer:
    """An agent identified by its own key (the connection), with a transport: "http" or "ws"."""

    def __init__(self, base: str, mediator: str, transport: str = "http") -> None:
        self.base = base
        self.mediator = mediator
        self.transport = transport
        self.keys = KeyPair.generate()
        self.recipient_keys: dict[str, KeyPair] = {}
        self.http = httpx.AsyncClient(base_url=base, timeout=30)
        self.ws: Any = None
        self.frames: asyncio.Queue[bytes] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None

    @property
    def verkey(self) -> str:
        return self.keys.verkey_b58

    async def __aenter__(self) -> Peer:
        if self.transport == "ws":
            await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()
        await self.http.aclose()

    async def connect(self) -> None:
        self.ws = await websockets.connect("ws" + self.base[4:] + "/", max_size=None)
        self._reader = asyncio.create_task(self._read())

    async def disconnect(self) -> None:
        if self.ws is not None:
            await self.ws.close()
            self.ws = None
        if self._reader is not None:
            self._reader.cancel()
            self._reader = None

    async def _read(self) -> None:
        async for frame in self.ws:
            await self.frames.put(frame.encode() if isinstance(frame, str) else frame)

    def pack(self, msg: dict[str, Any], *, anon: bool = False) -> bytes:
        return envelope.pack(json.dumps(msg).encode(), [self.mediator], None if anon else self.keys)

    def open(self, data: bytes) -> dict[str, Any]:
        """Decrypt a frame or body sent to our connection key or one of our recipient keys."""
        keys = {self.verkey: self.keys, **self.recipient_keys}
        opened = envelope.unpack(data, keys.get)
        result: dict[str, Any] = json.loads(opened.message)
        return result

    async def post(self, data: bytes) -> httpx.Response:
        return await self.http.post("/", content=data, headers=ENVELOPE)

    async def send(self, msg: dict[str, Any], *, anon: bool = False) -> dict[str, Any] | None:
        """Send one message; the decrypted reply (HTTP body, or the next WS frame), if any."""
        data = self.pack(msg, anon=anon)
        if self.transport == "http":
            response = await self.post(data)
            assert response.status_code in (200, 202), response.text
            return self.open(response.content) if response.status_code == 200 else None
        await self.ws.send(data.decode())
        if msg.get("~transport", {}).get("return_route", "none") == "none":
            return None
        return await self.next_message()

    async def next_frame(self, wait: float = 5) -> bytes:
        return await asyncio.wait_for(self.frames.get(), wait)

    async def next_message(self, wait: float = 5) -> dict[str, Any]:
        return self.open(await self.next_frame(wait))

    async def no_frame(self, seconds: float) -> bool:
        try:
            await asyncio.wait_for(self.frames.get(), seconds)
        except TimeoutError:
            return True
        return False

    # ---------------------------------------------------------------- helpers

    async def mediate(self) -> str:
        """Get mediation and register one new recipient key; returns that key (base58)."""
        grant = await self.send(message("coordinate-mediation/1.0/mediate-request"))
        assert grant is not None and grant["@type"].endswith("/mediate-grant"), grant
        return await self.add_key()

    async def add_key(self) -> str:
        pair = KeyPair.generate()
        self.recipient_keys[pair.verkey_b58] = pair
        update = message(
            "coordinate-mediation/1.0/keylist-update",
            updates=[{"recipient_key": pair.did_key, "action": "add"}],
        )
        reply = await self.send(update)
        assert reply is not None and reply["updated"][0]["result"] == "success", reply
        return pair.verkey_b58

    async def status(self, **fields: Any) -> dict[str, Any]:
        reply = await self.send(message("messagepickup/2.0/status-request", **fields))
        assert reply is not None
        return reply

    async def deliver(self, limit: int = 10, **fields: Any) -> dict[str, Any]:
        reply = await self.send(
            message("messagepickup/2.0/delivery-request", limit=limit, **fields)
        )
        assert reply is not None
        return reply

    async def ack(self, ids: list[str]) -> dict[str, Any] | None:
        return await self.send(message("messagepickup/2.0/messages-received", message_id_list=ids))


def attachments(delivery: dict[str, Any]) -> list[tuple[str, bytes]]:
    return [(a["@id"], base64.urlsafe_b64decode(a["data"]["base64"])) for a in delivery["~attach"]]


async def forward(
    base: str, mediator: str, to: str, content: dict[str, Any], *, extra_kids: tuple[str, ...] = ()
) -> httpx.Response:
    """What a third-party sender does: encrypt for `to`, wrap in a forward, anoncrypt it."""
    inner = envelope.pack(json.dumps(content).encode(), [to, *extra_kids], KeyPair.generate())
    fwd = {
        "@type": "https://didcomm.org/routing/1.0/forward",
        "@id": str(uuid.uuid4()),
        "to": to,
        "msg": json.loads(inner),
    }
    async with httpx.AsyncClient(base_url=base) as client:
        return await client.post(
            "/", content=envelope.pack(json.dumps(fwd).encode(), [mediator]), headers=ENVELOPE
        )
