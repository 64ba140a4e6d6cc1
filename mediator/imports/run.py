"""`mediator import acapy|credo`: read an old mediator's store, write it into our Redis, and
say what was carried over, skipped and refused.

The order: open the store (read-only), read the mediator (refused here when it is not one),
check the target (refused when it holds another mediator), write the mediator's keys and
invitations, then its wallets in batches (each batch written while the next is read), then
its endpoints, then the messages it held for them. Progress goes to `progress` every few
seconds on a long run.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Protocol

from redis.exceptions import ResponseError

from mediator import runtime
from mediator.didcomm.identity import from_seed_setting
from mediator.didcomm.keys import KeyPair
from mediator.engine import Engine, keys
from mediator.errors import ImportRefused
from mediator.imports.acapy import AcapyReader
from mediator.imports.credo import CredoReader
from mediator.imports.model import Connection, QueuedMessage, Report, Source
from mediator.imports.passes import Passes, workers_for
from mediator.imports.pg_queue import PostgresQueue
from mediator.imports.source import SourceStore
from mediator.imports.writer import Target, Writer
from mediator.mediation.identity import load_identity
from mediator.mediation.imported import Sealer
from mediator.mediation.mailbox import defaults as mailbox_defaults
from mediator.settings import Settings
from mediator.storage.clients import STORAGE_ERRORS, Backend

BATCH = 500  # connections per round of writes
PROGRESS_SECONDS = 2.0
CONNECTION_CATEGORY = {"acapy": "connection", "credo": "ConnectionRecord"}


class Reader(Protocol):
    kind: str

    async def mediator(self) -> Source: ...

    def connections(self, source: Source) -> AsyncIterator[Connection]: ...

    def messages(self, source: Source) -> AsyncIterator[QueuedMessage]: ...


@dataclass(frozen=True)
class ImportOptions:
    kind: str  # acapy or credo
    wallet_uri: str = field(repr=False)  # may hold a password
    wallet_key: str = field(repr=False)
    key_method: str | None = None
    profile: str | None = None
    dry_run: bool = False
    queue_url: str | None = field(default=None, repr=False)  # credo: its queue in Postgres
    workers: int | None = None  # processes for the index passes (None: passes.workers_for)


@dataclass
class Outcome:
    source: Source
    seconds: float
    notes: list[str]  # what the operator should do next

    @property
    def report(self) -> Report:
        return self.source.report


async def run_import(
    settings: Settings,
    redis_url: str,
    options: ImportOptions,
    progress: Callable[[str], None] = lambda line: None,
) -> Outcome:
    try:
        return await _run_import(settings, redis_url, options, progress)
    except STORAGE_ERRORS as exc:
        raise ImportRefused(f"the mediator's Redis: {exc}") from exc
    except ResponseError as exc:
        raise ImportRefused(f"the mediator's Redis refused a write: {exc}") from exc


async def _run_import(
    settings: Settings,
    redis_url: str,
    options: ImportOptions,
    progress: Callable[[str], None],
) -> Outcome:
    started = time.monotonic()
    store = await SourceStore.open(
        options.wallet_uri, options.wallet_key, options.key_method, options.profile
    )
    store.progress = progress
    queue = PostgresQueue(options.queue_url) if options.queue_url else None
    passes: Passes | None = None
    try:
        if queue is not None:
            await queue.open()
        total = await store.count(CONNECTION_CATEGORY[options.kind])
        passes = Passes(store, workers_for(total, options.workers))
        reader: Reader = (
            AcapyReader(store, passes)
            if options.kind == "acapy"
            else CredoReader(store, queue, passes)
        )
        source = await reader.mediator()
        async with _target(settings, redis_url, dry_run=options.dry_run) as target:
            writer = Writer(target, source.report, dry_run=options.dry_run)
            await writer.check(source)
            await import_into(writer, reader, source, total, progress)
    finally:
        if passes is not None:
            await passes.close()
        if queue is not None:
            await queue.close()
        await store.close()
    return Outcome(source, time.monotonic() - started, _notes(settings, source))


def _notes(settings: Settings, source: Source) -> list[str]:
    """What to do next: advertise the old endpoints (wallets' contacts hold them); keep the
    key seed apart from Redis (it unseals the imported keys)."""
    notes = []
    if not settings.didcomm.key_seed:
        notes.append(
            "note: the key seed is kept in this Redis, beside the keys it seals: give every "
            "node and this command the same --key-seed-file, kept apart from Redis and its "
            "backups (docs/migrating.md, Security of imported keys)"
        )
    return notes + _endpoint_notes(settings, source)


def _endpoint_notes(settings: Settings, source: Source) -> list[str]:
    old = source.endpoints
    http = next((e for e in old if e.startswith("http")), None)
    ws = next((e for e in old if e.startswith("ws")), None)
    ours = [settings.public_endpoint, settings.public_ws_endpoint]
    if not old or (http in ours and (ws is None or ws in ours)):
        return []
    flags = [f"--endpoint {http}"] if http else []
    flags += [f"--ws-endpoint {ws}"] if ws else []
    return [
        f"note: start the nodes with {' '.join(flags)} (MEDIATOR_ENDPOINT, "
        "MEDIATOR_WS_ENDPOINT): the wallets and their contacts know those"
    ]


@contextlib.asynccontextmanager
async def _target(settings: Settings, redis_url: str, *, dry_run: bool) -> AsyncIterator[Target]:
    """The mediator's Redis, started as a node starts it (layout, identity); a dry run
    writes nothing, not even the layout or a new key seed."""
    if not dry_run:
        async with runtime.running(settings, redis_url) as rt:
            now_ms = await _now_ms(rt.backend)
            defaults = mailbox_defaults(settings.queue)
            yield Target(rt.redis, rt.engine, Sealer(rt.identity), defaults, now_ms)
        return
    async with runtime.connected(redis_url) as backend:
        identity = await _identity_without_writing(backend, settings.didcomm.key_seed)
        engine = Engine(backend.client, defaults=runtime.engine_defaults(settings))
        yield Target(
            backend.client,
            engine,
            Sealer(identity),
            mailbox_defaults(settings.queue),
            await _now_ms(backend),
        )


async def _identity_without_writing(backend: Backend, seed_setting: str) -> KeyPair:
    if seed_setting:
        return from_seed_setting(seed_setting)
    if await backend.client.hexists(keys.mediator_identity(), keys.IDENTITY_SEED):
        return await load_identity(backend.client, "")
    return KeyPair.generate()  # nothing is written in a dry run: any key seals alike


async def _now_ms(backend: Backend) -> int:
    seconds, micros = await backend.client.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def import_into(
    writer: Writer,
    reader: Reader,
    source: Source,
    total: int = 0,
    progress: Callable[[str], None] = lambda line: None,
) -> None:
    """Everything `reader` read after `source` (its mediator), written by `writer`, once
    the target was checked (Writer.check)."""
    await writer.write_mediator(source)
    await _connections(reader, writer, source, total, progress)
    await writer.write_endpoints(source)  # the wallets' connections named some of them
    await _messages(reader, writer, source)


async def _connections(
    reader: Reader, writer: Writer, source: Source, total: int, progress: Callable[[str], None]
) -> None:
    batch: list[Connection] = []
    read = 0
    started = last = time.monotonic()
    writing: asyncio.Task[None] | None = None  # the batch before: written while this is read
    try:
        async for connection in reader.connections(source):
            if not read:
                # The readers' indexes (a million entries) are built before the first
                # wallet and kept to the end: the collector's full passes need not walk
                # them each time (they took a tenth of the run).
                gc.freeze()
            batch.append(connection)
            read += 1
            if len(batch) >= BATCH:
                if writing is not None:
                    await writing
                writing = asyncio.create_task(writer.write_connections(batch))
                batch = []
            now = time.monotonic()
            if now - last >= PROGRESS_SECONDS:
                last = now
                rate = read / (now - started)
                progress(
                    f"wallets: {read:,} read of {total:,} connection records "
                    f"({rate:,.0f}/s), {source.report.imported['connections']:,} imported"
                )
        if writing is not None:
            await writing
    except BaseException:
        if writing is not None and not writing.done():
            writing.cancel()
            with contextlib.suppress(BaseException):
                await writing
        raise
    finally:
        gc.unfreeze()
    if batch:
        await writer.write_connections(batch)


async def _messages(reader: Reader, writer: Writer, source: Source) -> None:
    """Queued messages come per wallet, in order, maybe in several groups a wallet (from
    the store, then from a Postgres queue): each group goes in at its place in the wallet's
    sequence."""
    current: list[QueuedMessage] = []
    positions: dict[str, int] = {}  # wallet -> its messages seen so far in this run

    async def flush() -> None:
        wallet = current[0].connection
        await writer.write_messages(wallet, current, positions.get(wallet, 0))
        positions[wallet] = positions.get(wallet, 0) + len(current)

    async for message in reader.messages(source):
        if current and current[0].connection != message.connection:
            await flush()
            current = []
        current.append(message)
    if current:
        await flush()


def report_lines(outcome: Outcome, *, dry_run: bool) -> list[str]:
    """The summary printed at the end: what was (or would be) imported, what was there
    already, skipped and refused, with why; the old mediator's endpoints."""
    source, report = outcome.source, outcome.report
    verb = "would import" if dry_run else "imported"
    lines = [
        f"{verb} from the {source.kind} mediator's store (version {source.version}, profile "
        f"{source.profile}) in {outcome.seconds:.1f} s:"
    ]
    names = (
        "routing keys", "invitations", "connections", "grants", "mediation requested",
        "mediation denied", "recipient keys", "keys", "queued messages",
    )  # fmt: skip
    for name in names:
        if report.imported[name] or report.existing[name] or name in names[:3]:
            there = f" ({report.existing[name]:,} there already)" if report.existing[name] else ""
            lines.append(f"  {name:<20} {report.imported[name]:>10,}{there}")
    for title, counts in (("skipped", report.skipped), ("refused", report.refused)):
        if counts:
            lines.append(f"{title}:")
            for reason, n in counts.most_common():
                example = report.examples.get(reason)
                hint = f" (e.g. {example[0]})" if example else ""
                lines.append(f"  {n:>10,}  {reason}{hint}")
    if source.endpoints:
        lines.append(f"the old mediator's endpoints: {', '.join(source.endpoints)}")
    return lines + outcome.notes
