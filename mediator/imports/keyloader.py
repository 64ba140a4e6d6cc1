"""The old mediator's private keys, loaded by a worker process while this one reads the
wallets.

Loading a key from Askar (fetch, decrypt, export) costs about a third of what importing a
wallet costs this process, and every wallet needs one: on a large store a worker process
with its own connection to the store loads them, in batches of the names asked for within
one turn of the event loop, while this process reads and writes the wallets on another
core. On a small store, or with one core, the keys are loaded here (SourceStore.key_pair).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import threading
from typing import Any

from mediator.didcomm.keys import KeyPair
from mediator.errors import ImportRefused, InvalidKey
from mediator.imports.source import SourceStore, StoreAddress

WORKER_CONCURRENCY = 64  # a worker's lookups in flight (Askar's threads fetch side by side)


class KeyLoader:
    """Key pairs by name from `store`: in a worker process when `in_worker`, else here."""

    def __init__(self, store: SourceStore, *, in_worker: bool = False) -> None:
        self.store = store
        self.in_worker = in_worker
        self._process: Any = None
        self._pipe: Any = None
        self._reader: threading.Thread | None = None
        self._asked: list[tuple[str, asyncio.Future[KeyPair | None]]] = []  # not yet sent
        self._sent: list[list[asyncio.Future[KeyPair | None]]] = []  # batches, in order
        self._failed: ImportRefused | None = None

    async def key_pair(self, name: str) -> KeyPair | None:
        """The Ed25519 key named `name`; None when the store has no such key."""
        if not self.in_worker:
            return await self.store.key_pair(name)
        if self._failed is not None:
            raise self._failed
        loop = asyncio.get_running_loop()
        if self._process is None:
            self._start(loop)
        future: asyncio.Future[KeyPair | None] = loop.create_future()
        if not self._asked:
            loop.call_soon(self._send)  # with the names asked in this turn of the loop
        self._asked.append((name, future))
        return await future

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, theirs = context.Pipe(duplex=True)
        self._process = context.Process(
            target=_serve, args=(self.store.address, theirs), name="import-keys", daemon=True
        )
        self._process.start()
        theirs.close()
        self._reader = threading.Thread(target=self._replies, args=(loop,), daemon=True)
        self._reader.start()

    def _send(self) -> None:
        asked, self._asked = self._asked, []
        if self._failed is not None:
            for _, future in asked:
                if not future.done():
                    future.set_exception(self._failed)
            return
        self._sent.append([future for _, future in asked])
        self._pipe.send([name for name, _ in asked])

    def _replies(self, loop: asyncio.AbstractEventLoop) -> None:
        """In a thread: each batch's answer, handed to the loop in the order sent."""
        while True:
            try:
                answer = self._pipe.recv()
            except (EOFError, OSError):
                answer = None
            try:
                loop.call_soon_threadsafe(self._answered, answer)
            except RuntimeError:  # the loop is closed
                return
            if answer is None or isinstance(answer, ImportRefused):
                return

    def _answered(self, answer: Any) -> None:
        if answer is None or isinstance(answer, ImportRefused):
            self._failed = answer or ImportRefused(
                f"the worker process loading keys ended ({how_it_ended(self._process)}) "
                "before its answer"
            )
            for batch in self._sent:
                for future in batch:
                    if not future.done():
                        future.set_exception(self._failed)
            self._sent.clear()
            return
        batch = self._sent.pop(0)
        for future, sigkey in zip(batch, answer, strict=True):
            if not future.done():
                future.set_result(_pair(sigkey))

    async def close(self) -> None:
        """Stop the worker (its batches are answered, or the import failed)."""
        process, self._process = self._process, None
        if process is None:
            return
        self._failed = self._failed or ImportRefused("the import stopped loading keys")
        with contextlib.suppress(OSError, ValueError):  # the worker has gone already
            self._pipe.send(None)
        await asyncio.to_thread(process.join, 10)
        if process.is_alive():
            process.terminate()
            await asyncio.to_thread(process.join)
        self._pipe.close()
        if self._reader is not None:
            await asyncio.to_thread(self._reader.join, 10)


def how_it_ended(process: Any) -> str:
    """How a worker process that closed its pipe ended (it is reaped first)."""
    if process is None:
        return "stopped"
    process.join(1)
    code = process.exitcode
    if code is None:
        return "still running"
    return f"killed by signal {-code}" if code < 0 else f"exit code {code}"


def _pair(sigkey: bytes | None) -> KeyPair | None:
    if sigkey is None:
        return None
    try:
        return KeyPair(sigkey[32:], sigkey)
    except InvalidKey:
        return None


def _serve(address: StoreAddress, pipe: Any) -> None:
    """In the worker: answer each batch of names with their keys' 64-byte signing keys
    (None for a name with no Ed25519 key), until told to stop (None)."""
    try:
        asyncio.run(_serving(address, pipe))
    except ImportRefused as exc:
        pipe.send(exc)
    except Exception as exc:  # said in one line, as the import says its errors
        pipe.send(ImportRefused(f"loading keys: {type(exc).__name__}: {exc}"))
    finally:
        pipe.close()


async def _serving(address: StoreAddress, pipe: Any) -> None:
    store = await SourceStore.attach(address)
    slots = asyncio.Semaphore(WORKER_CONCURRENCY)

    async def load(name: str) -> bytes | None:
        async with slots:
            keys = await store.key_pair(name)
        return None if keys is None else keys.sigkey

    batches: asyncio.Queue[asyncio.Future[list[bytes | None]] | None] = asyncio.Queue()

    async def receive() -> None:  # the next batches are loaded while one is answered
        while (names := await asyncio.to_thread(_next, pipe)) is not None:
            await batches.put(asyncio.gather(*map(load, names)))
        await batches.put(None)

    async def answer() -> None:
        while (batch := await batches.get()) is not None:
            pipe.send(await batch)

    try:
        await asyncio.gather(receive(), answer())
    finally:
        await store.close()


def _next(pipe: Any) -> list[str] | None:
    try:
        names: list[str] | None = pipe.recv()
    except (EOFError, OSError):
        return None  # the import ended
    return names
