"""`mediator import acapy|credo`: read an old mediator's store, write it into our Redis, and
say what was carried over, skipped and refused.

The order: open the store (read-only), read the mediator (refused here when it is not one),
check the target (refused when it holds another mediator), write the mediator's keys and
invitations, then its wallets in batches, then the messages it held for them. Progress goes
to `progress` every few seconds on a long run.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Protocol

from mediator import runtime
from mediator.didcomm.identity import from_seed_setting
from mediator.didcomm.keys import KeyPair
from mediator.engine import Engine, keys
from mediator.imports.acapy import AcapyReader
from mediator.imports.credo import CredoReader
from mediator.imports.model import Connection, QueuedMessage, Report, Source
from mediator.imports.pg_queue import PostgresQueue
from mediator.imports.source import SourceStore
from mediator.imports.writer import Target, Writer
from mediator.mediation.identity import load_identity
from mediator.mediation.imported import Sealer
from mediator.mediation.mailbox import defaults as mailbox_defaults
from mediator.settings import Settings
from mediator.storage.clients import Backend

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
    wallet_uri: str
    wallet_key: str
    key_method: str | None = None
    profile: str | None = None
    dry_run: bool = False
    queue_url: str | None = None  # credo: its queue in Postgres


@dataclass
class Outcome:
    source: Source
    seconds: float

    @property
    def report(self) -> Report:
        return self.source.report


async def run_import(
    settings: Settings,
    redis_url: str,
    options: ImportOptions,
    progress: Callable[[str], None] = lambda line: None,
) -> Outcome:
    started = time.monotonic()
    store = await SourceStore.open(
        options.wallet_uri, options.wallet_key, options.key_method, options.profile
    )
    queue = PostgresQueue(options.queue_url) if options.queue_url else None
    try:
        if queue is not None:
            await queue.open()
        reader: Reader = (
            AcapyReader(store) if options.kind == "acapy" else CredoReader(store, queue)
        )
        source = await reader.mediator()
        total = await store.count(CONNECTION_CATEGORY[options.kind])
        async with _target(settings, redis_url, dry_run=options.dry_run) as target:
            writer = Writer(target, source.report, dry_run=options.dry_run)
            await writer.check(source)
            await import_into(writer, reader, source, total, progress)
    finally:
        if queue is not None:
            await queue.close()
        await store.close()
    return Outcome(source, time.monotonic() - started)


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
    await _messages(reader, writer, source)


async def _connections(
    reader: Reader, writer: Writer, source: Source, total: int, progress: Callable[[str], None]
) -> None:
    batch: list[Connection] = []
    read = 0
    started = last = time.monotonic()
    writing: asyncio.Task[None] | None = None  # the batch before: written while this is read
    async for connection in reader.connections(source):
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
    if batch:
        await writer.write_connections(batch)


async def _messages(reader: Reader, writer: Writer, source: Source) -> None:
    """Queued messages come per wallet, in order: each wallet's go in as one run."""
    current: list[QueuedMessage] = []
    async for message in reader.messages(source):
        if current and current[0].connection != message.connection:
            await writer.write_messages(current[0].connection, current)
            current = []
        current.append(message)
    if current:
        await writer.write_messages(current[0].connection, current)


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
    return lines
