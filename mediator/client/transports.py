"""HTTP and WebSocket transports: bytes out, bytes (or nothing) back."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import httpx
import websockets

ENVELOPE_TYPE = "application/didcomm-envelope-enc"


class ClientError(Exception):
    """The mediator refused a message (HTTP 4xx/5xx, or a JSON error frame)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


class HttpTransport:
    def __init__(self, base_url: str, client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.client = client or httpx.AsyncClient(timeout=30)

    async def send(self, data: bytes) -> bytes | None:
        """POST one envelope; the envelope that came back, or None (202)."""
        response = await self.client.post(
            self.base_url + "/", content=data, headers={"content-type": ENVELOPE_TYPE}
        )
        if response.status_code >= 400:
            raise ClientError(response.status_code, response.text)
        return response.content if response.status_code == 200 and response.content else None

    async def close(self) -> None:
        await self.client.aclose()


class WsTransport:
    """One WebSocket; every frame received goes to `frames` in arrival order."""

    def __init__(self, base_url: str) -> None:
        self.url = "ws" + base_url.rstrip("/")[4:] + "/"
        self.frames: asyncio.Queue[bytes] = asyncio.Queue()
        self._ws: Any = None
        self._reader: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        return self._ws is not None

    async def connect(self) -> None:
        self._ws = await websockets.connect(self.url, max_size=None)
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        with contextlib.suppress(websockets.ConnectionClosed):
            async for frame in self._ws:
                await self.frames.put(frame.encode() if isinstance(frame, str) else frame)

    async def send(self, data: bytes) -> None:
        if self._ws is None:
            raise ClientError(0, "the WebSocket is not connected")
        await self._ws.send(data.decode())

    async def receive(self, wait: float = 5) -> bytes:
        return await asyncio.wait_for(self.frames.get(), wait)

    async def close(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
            self._reader = None
