"""HTTP and WebSocket transports for the client: envelopes out, envelopes (or nothing) back.

Both are async context managers. `ClientError` is what the mediator refusing looks like:
an HTTP 4xx/5xx, or a JSON error frame on a WebSocket.

The network is pluggable: HTTP goes through any `httpx.AsyncClient` (`client=`), a WebSocket
is opened by a `WsConnector` (`connector=`). The defaults are real sockets (httpx, and the
`websockets` library); the test suites pass the app in their own process instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from mediator.didcomm.keys import did_key_to_verkey

ENVELOPE_TYPE = "application/didcomm-envelope-enc"

log = logging.getLogger(__name__)


class ClientError(Exception):
    """The mediator refused a message. `status` is the HTTP status (0 on a WebSocket)."""

    def __init__(self, status: int, body: str) -> None:
        super().__init__(f"{status}: {body}" if status else body)
        self.status = status
        self.body = body

    def _field(self, name: str) -> str | None:
        try:
            value = json.loads(self.body)
        except ValueError:
            return None
        found = value.get(name) if isinstance(value, dict) else None
        return found if isinstance(found, str) else None

    @property
    def error(self) -> str | None:
        """The `error` text of a JSON error body, if it was one."""
        return self._field("error")

    @property
    def code(self) -> str | None:
        """The machine-readable `code` of a JSON error body, if it was one."""
        return self._field("code")


def _with_root_path(url: str) -> str:
    """The mediator listens at `/`: an endpoint written without a path means that."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path or "/"))


class HttpTransport:
    """POST one envelope, get the envelope that came back or None (202)."""

    kind = "http"

    def __init__(
        self, base_url: str, *, client: httpx.AsyncClient | None = None, timeout: float = 30.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.url = _with_root_path(base_url)
        self._own_client = client is None
        self.client = client if client is not None else httpx.AsyncClient(timeout=timeout)

    async def send(self, envelope: bytes) -> bytes | None:
        response = await self.client.post(
            self.url, content=envelope, headers={"content-type": ENVELOPE_TYPE}
        )
        if response.status_code >= 400:
            raise ClientError(response.status_code, response.text)
        if response.status_code == 200 and response.content:
            return response.content
        return None

    async def close(self) -> None:
        if self._own_client:
            await self.client.aclose()

    async def __aenter__(self) -> HttpTransport:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def ws_url(url: str) -> str:
    """`ws(s)://host/…` for a WebSocket URL or for the mediator's HTTP(S) endpoint."""
    parts = urlsplit(url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return _with_root_path(urlunsplit(parts._replace(scheme=scheme)))


class WsConnection(Protocol):
    """An open WebSocket, as `WsTransport` uses it."""

    @property
    def close_code(self) -> int | None:
        """The code the socket closed with; None while it is open."""

    async def send(self, data: str | bytes) -> None:
        """One text (str) or binary (bytes) frame."""

    async def receive(self) -> str | bytes | None:
        """The next frame; None once the socket is closed (by either side)."""

    async def close(self) -> None: ...


WsConnector = Callable[[str], Awaitable[WsConnection]]
"""Opens a WebSocket to a `ws(s)://` URL."""


class _Websocket:
    """A `websockets` client connection as a WsConnection."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws

    @property
    def close_code(self) -> int | None:
        return self.ws.close_code

    async def send(self, data: str | bytes) -> None:
        await self.ws.send(data)

    async def receive(self) -> str | bytes | None:
        try:
            return await self.ws.recv()
        except ConnectionClosed:
            return None

    async def close(self) -> None:
        await self.ws.close()


async def connect_websocket(url: str) -> WsConnection:
    """The default connector: a real socket, frames of any size."""
    return _Websocket(await connect(url, max_size=None))


FrameHook = Callable[[bytes], bool]


class WsTransport:
    """One WebSocket. Every frame received goes to `frames`, in arrival order, unless the
    `on_frame` hook takes it (returns True): that is how a client picks out its replies."""

    kind = "ws"

    def __init__(
        self,
        url: str,
        *,
        connector: WsConnector = connect_websocket,
        on_frame: FrameHook | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        self.url = ws_url(url)
        self.connector = connector
        self.on_frame = on_frame
        self.on_close = on_close
        self.frames: asyncio.Queue[bytes] = asyncio.Queue()
        self._ws: WsConnection | None = None
        self._reader: asyncio.Task[None] | None = None
        self._closed = asyncio.Event()

    @property
    def connected(self) -> bool:
        return self._ws is not None

    @property
    def connection(self) -> WsConnection | None:
        """The open socket (its `close_code` says how it ended), None when not connected."""
        return self._ws

    async def connect(self) -> None:
        if self._ws is not None:
            return
        ws = await self.connector(self.url)
        self._ws = ws
        self._closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read(ws, self._closed), name="ws-client-reader")

    async def _read(self, ws: WsConnection, closed: asyncio.Event) -> None:
        try:
            while (frame := await ws.receive()) is not None:
                data = frame.encode() if isinstance(frame, str) else bytes(frame)
                if not self._taken(data):
                    self.frames.put_nowait(data)
        finally:
            closed.set()
            if self._ws is ws:
                self._ws = None
            if self.on_close is not None:
                self.on_close()

    def _taken(self, data: bytes) -> bool:
        if self.on_frame is None:
            return False
        try:
            return self.on_frame(data)
        except Exception:  # a broken hook must not stop the socket: the frame stays readable
            log.exception("WebSocket frame hook failed")
            return False

    async def send(self, envelope: bytes) -> None:
        if self._ws is None:
            raise ClientError(0, "the WebSocket is not connected")
        try:
            text = envelope.decode()
        except UnicodeDecodeError:
            await self._ws.send(envelope)
        else:
            await self._ws.send(text)  # the mediator answers in text frames; so do we

    async def receive(self, timeout: float | None = 5.0) -> bytes:  # noqa: ASYNC109 (a per-frame wait)
        """The next frame not taken by `on_frame`; TimeoutError when none comes in time,
        ClientError when the socket is (or gets) closed with nothing left to read."""
        if not self.frames.empty():
            return self.frames.get_nowait()
        if self._ws is None:
            raise ClientError(0, "the WebSocket is not connected")
        getter = asyncio.ensure_future(self.frames.get())
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait(
                {getter, closed}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            for waiter in (getter, closed):
                if not waiter.done():
                    waiter.cancel()
        if getter.done() and not getter.cancelled():
            return getter.result()
        if closed.done() and not closed.cancelled():
            raise ClientError(0, "the WebSocket closed")
        raise TimeoutError(f"no WebSocket frame within {timeout} s")

    async def close(self) -> None:
        """Close the socket; frames already received stay in `frames`."""
        ws, reader = self._ws, self._reader
        self._ws, self._reader = None, None
        if ws is not None:
            await ws.close()
        if reader is not None:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def __aenter__(self) -> WsTransport:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


Transport = HttpTransport | WsTransport


async def fetch_invitation(
    base_url: str, *, client: httpx.AsyncClient | None = None
) -> dict[str, Any]:
    """`GET /invitation`: `{"invitation_url", "invitation"}` (through `client` if given)."""
    url = base_url.rstrip("/") + "/invitation"
    if client is not None:
        answer = await client.get(url)
    else:
        async with httpx.AsyncClient(timeout=10) as own:
            answer = await own.get(url)
    if answer.status_code != 200:
        raise ClientError(answer.status_code, answer.text)
    result: dict[str, Any] = answer.json()
    return result


async def mediator_key(base_url: str, *, client: httpx.AsyncClient | None = None) -> str:
    """The mediator's base58 verkey, from the first service of its invitation."""
    oob = (await fetch_invitation(base_url, client=client))["invitation"]
    return did_key_to_verkey(oob["services"][0]["recipientKeys"][0])
