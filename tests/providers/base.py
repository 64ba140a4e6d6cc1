"""What the local provider servers share: an event loop of their own in a daemon thread (so that
sync fixtures and async tests alike can use them), a socket bound to a free loopback port before
start (so that credential files can name the URL), scripted failures, and waiting helpers that
poll the recorded requests from any thread or event loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self, TypeVar

import uvicorn

from tests.providers.credentials import TlsCert

T = TypeVar("T")


def bind_loopback() -> socket.socket:
    """A listening-ready TCP socket on 127.0.0.1 at a port the OS picked (no race)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


class LoopThread:
    """An asyncio event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_forever()
            tasks = asyncio.all_tasks(self.loop)
            for task in tasks:
                task.cancel()
            if tasks:
                self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        finally:
            self.loop.close()

    def start(self) -> None:
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run `coro` on the thread's loop and wait for its result from this thread."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(10)


@dataclass
class Outcome:
    """A scripted answer: the HTTP status, the provider's error code, an optional Retry-After
    (seconds), and how many more requests it applies to (None: all of them)."""

    status: int
    error: str
    retry_after: int | None = None
    remaining: int | None = None


class Script:
    """Scripted failures: per key (a device token) and a queue for the next requests whatever
    their key. Per-key outcomes are consulted first. An outcome replaces only what would have
    been an acceptance: authentication and validation errors still come first, as they do at
    the providers, so a scripted failure never hides a client's own mistake."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, Outcome] = {}
        self._queue: deque[Outcome] = deque()

    def for_key(self, key: str, outcome: Outcome) -> None:
        with self._lock:
            self._by_key[key] = outcome

    def next(self, count: int, outcome: Outcome) -> None:
        with self._lock:
            self._queue.extend(
                Outcome(outcome.status, outcome.error, outcome.retry_after, 1) for _ in range(count)
            )

    def take(self, key: str) -> Outcome | None:
        with self._lock:
            outcome = self._by_key.get(key)
            if outcome is not None:
                if outcome.remaining is not None:
                    outcome.remaining -= 1
                    if outcome.remaining <= 0:
                        del self._by_key[key]
                return outcome
            if self._queue:
                return self._queue.popleft()
            return None

    def clear(self) -> None:
        with self._lock:
            self._by_key.clear()
            self._queue.clear()


class ProviderServer:
    """Start/stop in a thread of its own, counters, scripting and waiting; subclasses provide
    `_serve` (start listening on `self.sock`) and `_shutdown`, both run on the server's loop."""

    name = "provider"

    def __init__(self) -> None:
        self.sock = bind_loopback()
        self.port: int = self.sock.getsockname()[1]
        self.host = "127.0.0.1"
        self.clock: Callable[[], float] = time.time
        """The server's notion of now; replace it (e.g. `lambda: time.time() + 3600`) to make
        tokens it issued or accepted appear older."""
        self.rejected: Counter[str] = Counter()
        """Every non-2xx answer, counted by the provider's error code or reason."""
        self.requests = 0
        self.script = Script()
        self._lock = threading.Lock()
        self._thread: LoopThread | None = None

    async def _serve(self) -> None:
        raise NotImplementedError

    async def _shutdown(self) -> None:
        raise NotImplementedError

    def start(self) -> Self:
        self._thread = LoopThread(f"{self.name}-{self.port}")
        self._thread.start()
        self._thread.run(self._serve())
        return self

    def stop(self) -> None:
        if self._thread is None:
            return
        with contextlib.suppress(Exception):
            self._thread.run(self._shutdown())
        self._thread.close()
        self._thread = None
        self.sock.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _reject(self, error: str) -> None:
        with self._lock:
            self.rejected[error] += 1

    def clear_failures(self) -> None:
        """Forget every scripted failure."""
        self.script.clear()

    async def wait_until(
        self,
        predicate: Callable[[], bool],
        timeout: float = 5.0,  # noqa: ASYNC109 (the helpers' API: a plain timeout)
        what: str = "condition",
    ) -> None:
        """Poll `predicate` from the caller's event loop until true; TimeoutError after
        `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: no {what} within {timeout}s")
            await asyncio.sleep(0.01)

    def wait_until_sync(
        self, predicate: Callable[[], bool], timeout: float = 5.0, what: str = "condition"
    ) -> None:
        """`wait_until` for synchronous code."""
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.name}: no {what} within {timeout}s")
            time.sleep(0.01)


class UvicornServer(ProviderServer):
    """A provider whose API is plain HTTP/1.1 (or HTTPS with `tls`): an ASGI app under uvicorn."""

    def __init__(self, tls: TlsCert | None = None) -> None:
        super().__init__()
        self.tls = tls
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    def app(self) -> Any:
        raise NotImplementedError

    async def _serve(self) -> None:
        config = uvicorn.Config(
            self.app(),
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
            ssl_certfile=str(self.tls.cert_path) if self.tls else None,
            ssl_keyfile=str(self.tls.key_path) if self.tls else None,
        )
        self._server = uvicorn.Server(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[self.sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError(f"{self.name} did not start")
            await asyncio.sleep(0.005)

    async def _shutdown(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
