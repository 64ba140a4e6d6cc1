"""The real app in the test's own process, for the fast tier: `create_app` with its lifespan
run (the runtime, the WakeHub, the in-process worker: everything `mediator serve` starts but
uvicorn), reached through httpx's ASGI transport, and its DIDComm WebSocket through
`AsgiWebSocket`. Two of them on one Redis are two nodes of a cluster: each has its own node
id, connections and pub/sub channel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import httpx
from asgi_lifespan import LifespanManager
from starlette.types import ASGIApp, Message

from mediator.app import create_app
from mediator.client import ws_url
from mediator.settings import Settings

# What the tests' nodes change from the defaults: a quick upkeep worker, fresh totals.
QUICK_WORKER = {"worker_tick_seconds": 0.2, "stats_seconds": 1.0}
CLIENT = ("127.0.0.1", 40000)  # where the tests' requests and sockets come from

log = logging.getLogger(__name__)


class AsgiWebSocket:
    """One WebSocket to an ASGI app in this process, driven as an ASGI server drives it: the
    app runs as a task of its own, fed `websocket.connect`, `.receive` and `.disconnect`;
    what it sends is read here. Not httpx-ws: its transport holds an anyio task group that
    must be closed by the task that opened it, which a session's sockets and fixtures are not.

    After the app closed the socket its `receive` gets `websocket.disconnect`; after the
    client closed it, the app's sends fail as a server's do (OSError). An app that returns
    without closing closes with 1000, one that raises with 1011 (logged), as uvicorn."""

    def __init__(self, app: ASGIApp, url: str, headers: Sequence[tuple[str, str]] = ()) -> None:
        parts = urlsplit(ws_url(url))
        path = parts.path or "/"
        port = parts.port or (443 if parts.scheme == "wss" else 80)
        self.app = app
        self.scope: dict[str, Any] = {
            "type": "websocket",
            "asgi": {"version": "3.0", "spec_version": "2.4"},
            "http_version": "1.1",
            "scheme": parts.scheme,
            "server": (parts.hostname or "", port),
            "client": CLIENT,
            "root_path": "",
            "path": path,
            "raw_path": path.encode(),
            "query_string": parts.query.encode(),
            "headers": [
                (b"host", parts.netloc.encode()),
                *((k.lower().encode(), v.encode()) for k, v in headers),
            ],
            "subprotocols": [],
        }
        self.close_code: int | None = None
        self.close_reason = ""
        self.task: asyncio.Task[None] | None = None
        self._to_app: asyncio.Queue[Message] = asyncio.Queue()
        self._from_app: asyncio.Queue[Message] = asyncio.Queue()
        self._client_closed = False

    # ------------------------------------------------------------- the app's side

    async def _app_receive(self) -> Message:
        return await self._to_app.get()

    async def _app_send(self, message: Message) -> None:
        if self._client_closed and message["type"] == "websocket.close":
            return  # both sides closed at once: nothing left to say
        if self._client_closed or self.close_code is not None:
            raise OSError("the WebSocket is closed")
        if message["type"] == "websocket.close":
            self._to_app.put_nowait({"type": "websocket.disconnect", "code": message["code"]})
        self._from_app.put_nowait(message)

    async def _run(self) -> None:
        code = 1000
        try:
            await self.app(self.scope, self._app_receive, self._app_send)
        except Exception:
            log.exception("the app's WebSocket handler raised")
            code = 1011
        if not self._client_closed and self.close_code is None:
            self._from_app.put_nowait({"type": "websocket.close", "code": code})

    # ------------------------------------------------------------- the client's side

    async def open(self) -> AsgiWebSocket:
        """Connect; returns once the app accepted. OSError when it closed instead."""
        self.task = asyncio.create_task(self._run(), name="asgi-websocket")
        self._to_app.put_nowait({"type": "websocket.connect"})
        first = await self._from_app.get()
        if first["type"] != "websocket.accept":
            self._take_close(first)
            raise OSError(f"the app refused the WebSocket ({first})")
        return self

    def _take_close(self, message: Message) -> None:
        self.close_code = int(message.get("code", 1000))
        self.close_reason = str(message.get("reason") or "")

    async def send(self, data: str | bytes) -> None:
        if self._client_closed or self.close_code is not None:
            raise OSError("the WebSocket is closed")
        key = "text" if isinstance(data, str) else "bytes"
        self._to_app.put_nowait({"type": "websocket.receive", key: data})

    async def receive(self) -> str | bytes | None:
        if self._client_closed:
            return None
        if self.close_code is not None and self._from_app.empty():
            return None
        message = await self._from_app.get()
        if message["type"] == "websocket.send":
            text = message.get("text")
            return text if text is not None else bytes(message.get("bytes") or b"")
        self._take_close(message)
        return None

    async def close(self, code: int = 1000) -> None:
        """Close from the client's side; the app sees `websocket.disconnect` and winds down
        on its own (as behind a real server, the client does not wait for that)."""
        if self._client_closed:
            return
        self._client_closed = True
        if self.close_code is None:
            self.close_code = code
            self._to_app.put_nowait({"type": "websocket.disconnect", "code": code})

    async def finish(self, within: float = 10) -> None:
        """Close, and wait until the app's side has ended (cancelled after `within` s)."""
        await self.close()
        if self.task is None:
            return
        done, _ = await asyncio.wait({self.task}, timeout=within)
        if not done:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


class AppNode:
    """One node's app, started in this process; `client()` talks HTTP to it and
    `open_websocket` (a `mediator.client.WsConnector`) opens its DIDComm WebSocket. Its
    public endpoint is `base` unless `endpoint` is given."""

    def __init__(self, redis_url: str, name: str = "app", **settings: Any) -> None:
        self.base = f"http://{name}.inprocess"
        self.redis_url = redis_url
        settings.setdefault("endpoint", self.base)
        self.settings = Settings.of(node_id=f"{name}-{uuid.uuid4().hex[:6]}", **settings)
        self.app = create_app(self.settings, redis_url)
        self._lifespan = LifespanManager(self.app, startup_timeout=30, shutdown_timeout=30)
        self._sockets: set[AsgiWebSocket] = set()

    async def start(self) -> AppNode:
        await self._lifespan.__aenter__()
        return self

    async def stop(self) -> None:
        sockets, self._sockets = list(self._sockets), set()
        for socket in sockets:
            await socket.finish()
        await self._lifespan.__aexit__(None, None, None)

    def client(self, timeout: float = 90) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.app, client=CLIENT)
        return httpx.AsyncClient(transport=transport, base_url=self.base, timeout=timeout)

    async def open_websocket(
        self, url: str = "", headers: Sequence[tuple[str, str]] = ()
    ) -> AsgiWebSocket:
        """A WebSocket to this app (at `/` unless `url` names another path)."""
        socket = AsgiWebSocket(self.app, url or self.base, headers)
        self._sockets = {s for s in self._sockets if s.task is None or not s.task.done()}
        self._sockets.add(socket)
        return await socket.open()
