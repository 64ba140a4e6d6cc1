"""One address in front of the ready pods, as a Service with kube-proxy gives: each new TCP
connection goes to the next ready endpoint, and a pod taken out of the endpoints (not ready,
or being deleted) gets no new connection while the ones it has go on."""

from __future__ import annotations

import asyncio
import contextlib
import threading

from mediator.embedded import free_port


class Service:
    def __init__(self) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.endpoints: list[tuple[str, int]] = []
        self.connections: dict[str, int] = {}  # endpoint host -> connections sent there
        self.last: tuple[str, int] | None = None  # where the latest connection went
        self._turn = 0
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Service:
        self._thread.start()
        self._ready.wait(5)
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def add(self, host: str, port: int) -> None:
        with self._lock:
            self.endpoints.append((host, port))

    def remove(self, host: str) -> None:
        with self._lock:
            self.endpoints = [e for e in self.endpoints if e[0] != host]

    def _next(self) -> tuple[str, int] | None:
        with self._lock:
            if not self.endpoints:
                return None
            self._turn += 1
            target = self.endpoints[self._turn % len(self.endpoints)]
            self.connections[target[0]] = self.connections.get(target[0], 0) + 1
            self.last = target
            return target

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._accept, "127.0.0.1", self.port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        target = self._next()
        if target is None:
            writer.close()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()
