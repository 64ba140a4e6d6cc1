"""An import's index passes, each in a worker process when the store is large.

A pass reads every record of one category into an index (ACA-Py's `did` records into our
DIDs' verkeys, its `forward_route` records into each wallet's keylist, ...) before the
wallets are read. Each record costs Askar's decryption of its value and tags and its Python
wrapper (25-55 µs on the 2-core VM), and one process leaves cores idle: a store of a million
wallets (4.5 million such records) is read faster by several processes, each with its own
connection to the store (the SQLite copy, or the Postgres database) and its index sent back
when it is done, while this process goes on with what needs no index (on 2 cores the
whole import took 727 s so, against 875 s in one process: bench/README.md). On a small
store, or with one core, the passes run here side by side, as tasks.

A pass is a module-level coroutine function `job(store, report) -> index` (a worker finds it
by its name); what it skips goes to `report`, merged into the import's own.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mediator.errors import ImportRefused
from mediator.imports.keyloader import KeyLoader, how_it_ended
from mediator.imports.model import Report
from mediator.imports.source import SourceStore, StoreAddress

T = TypeVar("T")
Job = Callable[[SourceStore, Report], Awaitable[T]]

PARALLEL_FROM = 20_000  # connection records from which the passes go to worker processes


def workers_for(connections: int, asked: int | None = None) -> int:
    """Worker processes for a store of `connections` connection records: `asked`, else the
    cores this process may use, or none (the passes run in this process) on a small store,
    where starting the processes (about a second) costs more than it saves."""
    if asked is not None:
        return max(asked, 0)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (cores or 1) if connections >= PARALLEL_FROM and (cores or 1) > 1 else 0


class Passes:
    """Index passes over `store`: in up to `workers` processes at once, or in this one when
    0. A worker is a process per pass (spawned, so it inherits no thread or event loop),
    with a pipe of its own for its progress lines and its index: one that dies fails its
    pass with an error instead of leaving it waiting. `keys` loads the private keys, in a
    worker of its own too when there are workers (keyloader.py)."""

    def __init__(self, store: SourceStore, workers: int = 0) -> None:
        self.store = store
        self.workers = workers
        self.keys = KeyLoader(store, in_worker=workers > 0)
        self._slots = asyncio.Semaphore(max(workers, 1))
        self._context = multiprocessing.get_context("spawn")
        self._running: list[asyncio.Future[Any]] = []

    def start(self, job: Job[T], report: Report) -> asyncio.Future[T]:
        """The index `job` reads, as a future; what it skips is added to `report`."""
        if not self.workers:
            future: asyncio.Future[T] = asyncio.ensure_future(job(self.store, report))
        else:
            future = asyncio.ensure_future(self._in_worker(job, report))
        self._running.append(future)
        return future

    async def _in_worker(self, job: Job[T], report: Report) -> T:
        async with self._slots:
            receiving, sending = self._context.Pipe(duplex=False)
            process = self._context.Process(
                target=_work,
                args=(self.store.address, job, sending),
                name=f"import-{getattr(job, '__name__', 'pass')}",
                daemon=True,
            )
            process.start()
            sending.close()
            loop = asyncio.get_running_loop()
            try:
                outcome = await asyncio.to_thread(_receive, receiving, loop, self.store)
            finally:
                if process.is_alive():
                    process.terminate()  # cancelled: the import stops
                await asyncio.to_thread(process.join)
                receiving.close()
        if outcome is _ENDED:
            raise ImportRefused(
                f"a worker process reading the store ended ({how_it_ended(process)}) "
                "without its index"
            )
        if isinstance(outcome, BaseException):
            raise outcome
        index, found = outcome
        report.merge(found)
        return index  # type: ignore[no-any-return]

    async def close(self) -> None:
        """Stop the passes still running (an import that failed) and their workers."""
        for future in self._running:
            future.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        self._running.clear()
        await self.keys.close()


_ENDED = object()  # what _receive gets from a worker that ended without a word
PROGRESS, DONE = "progress", "done"  # what a worker sends: lines, then its outcome


def _receive(receiving: Any, loop: asyncio.AbstractEventLoop, store: SourceStore) -> Any:
    """In a thread: a worker's progress lines, said where the import's own are, until its
    outcome comes."""
    while True:
        try:
            kind, value = receiving.recv()
        except (EOFError, OSError):
            return _ENDED
        if kind == DONE:
            return value
        try:
            loop.call_soon_threadsafe(store.progress, value)
        except RuntimeError:  # the loop is closed: nobody is listening any more
            return _ENDED


def _work(address: StoreAddress, job: Job[T], sending: Any) -> None:
    """In a worker: `job` over its own connection to the store, its index (or the error
    that stopped it) sent back."""
    try:
        outcome: Any = asyncio.run(_attached(address, job, sending))
    except ImportRefused as exc:
        outcome = exc
    except Exception as exc:  # said in one line, as the import says its errors
        outcome = ImportRefused(f"reading the store: {type(exc).__name__}: {exc}")
    sending.send((DONE, outcome))
    sending.close()


async def _attached(address: StoreAddress, job: Job[T], sending: Any) -> tuple[T, Report]:
    store = await SourceStore.attach(address)
    store.progress = lambda line: sending.send((PROGRESS, line))
    report = Report()
    try:
        return await job(store, report), report
    finally:
        await store.close()
