"""The upkeep worker inside a node (--in-process-worker, the default): a node service
(mediator/plugins.py) that shares the node's connection, engine, pusher and notifier."""

from __future__ import annotations

from mediator.mediation.senders import SenderBooks
from mediator.plugins import NodeParts
from workers.runner import Worker


def in_process_worker(parts: NodeParts) -> Worker | None:
    runtime = parts.runtime
    settings = runtime.settings
    if not settings.worker.in_process:
        return None
    return Worker(
        settings.worker,
        settings.node.resolved_id,
        runtime.redis,
        runtime.engine,
        parts.pusher,
        parts.notifier,
        SenderBooks(runtime.redis, runtime.engine.scripts, settings.limits, settings.queue),
        parts.metrics,
    )
