"""The upkeep worker inside a node (--in-process-worker, the default): a node service
(mediator/plugins.py) that shares the node's connection, engine, pusher and notifier."""

from __future__ import annotations

from mediator.plugins import NodeParts
from workers.runner import Worker


def in_process_worker(parts: NodeParts) -> Worker | None:
    settings = parts.runtime.settings
    if not settings.in_process_worker:
        return None
    runtime = parts.runtime
    return Worker(
        settings, runtime.redis, runtime.engine, parts.pusher, parts.metrics, parts.notifier
    )
