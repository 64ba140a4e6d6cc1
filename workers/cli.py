"""`mediator worker`: an upkeep worker process, and its exec probe (`--check`). Added to the
`mediator` command through the `mediator.commands` entry point; what it runs is imported
only when it runs, so that every other command starts quickly."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from typing import Any

import click

from mediator.errors import ConfigError, MediatorError
from mediator.options import build_settings, fail, settings_options
from mediator.settings import Settings


@click.command()
@click.option("--check", is_flag=True, help="Exit 0 if the local worker is healthy, else 1.")
@settings_options("worker")
def worker(check: bool, **options: Any) -> None:
    """Run an upkeep worker: what is due (retention purge, delayed promotion, dead-letter
    hand-overs, push retries), the totals behind /metrics, and the paced index audit.

    Start as many as you like; they split the partitions between them by leases.
    Needs --redis-url (the embedded server belongs to one node).
    """
    settings = build_settings(options)
    if check:
        from workers.check import check as run_check

        if not settings.redis.url:
            click.echo("unhealthy: --check needs --redis-url / MEDIATOR_REDIS_URL", err=True)
            sys.exit(1)
        ok, text = run_check(settings.worker, settings.redis.url)
        click.echo(text)
        sys.exit(0 if ok else 1)
    if not settings.redis.url:
        fail("mediator worker needs --redis-url / MEDIATOR_REDIS_URL")
    from mediator.ops import allocator, logs
    from mediator.storage.target import parse as parse_redis_url

    try:
        parse_redis_url(settings.redis.url)
    except ConfigError as exc:
        fail(exc)
    logs.configure(settings.node.log_level, settings.node.resolved_id)
    allocator.tune()
    try:
        asyncio.run(_run(settings))
    except MediatorError as exc:
        fail(exc)


async def _run(settings: Settings) -> None:
    from mediator import runtime
    from mediator.cluster.presence import Presence
    from mediator.mediation.mailbox import Mailbox
    from mediator.mediation.push import Pusher
    from mediator.mediation.senders import SenderBooks
    from mediator.mediation.store import MediationStore
    from mediator.notify.notifier import Notifier
    from mediator.ops.metrics import Metrics
    from workers.runner import Worker

    rt = await runtime.start(settings, settings.redis.url)
    metrics = Metrics(worker=True)
    listen = settings.worker.metrics_listen
    endpoint = metrics.serve(listen) if listen else None
    redis, node = rt.redis, settings.node
    limits = settings.limits
    mailbox = Mailbox(rt.engine, settings.queue, forwards_per_second=limits.forwards_per_second)
    pusher = Pusher(
        redis, MediationStore(redis), mailbox, settings.push, settings.outbound, metrics
    )
    notifier = Notifier(
        redis,
        mailbox,
        # Only read here (who holds a connection's live socket), never held.
        Presence(redis, node.resolved_id, node.presence_seconds, 0.0),
        settings.notify,
        settings.push,
        settings.outbound,
        metrics,
    )
    senders = SenderBooks(redis, rt.engine.scripts, limits, settings.queue)
    upkeep = Worker(
        settings.worker, node.resolved_id, redis, rt.engine, pusher, notifier, senders, metrics
    )
    task = asyncio.create_task(upkeep.run(), name="worker")

    def stop() -> None:
        upkeep.stop()  # ends the loop should the cancellation be swallowed
        task.cancel()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    await pusher.aclose()
    await notifier.aclose()
    if endpoint is not None:
        endpoint.shutdown()
    await rt.aclose()
