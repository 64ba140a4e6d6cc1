"""`mediator worker --check`: the exec probe of a worker container."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from mediator.errors import ConfigError
from mediator.settings import WorkerSettings
from mediator.storage.clients import STORAGE_ERRORS, Backend


def check(settings: WorkerSettings, redis_url: str) -> tuple[bool, str]:
    """Healthy when the worker ticked recently and Redis answers."""
    path = Path(settings.health_file)
    try:
        stamp = float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False, f"no worker heartbeat in {path}"
    allowed = max(10.0, 3 * settings.tick_seconds, settings.lease_seconds)
    age = time.time() - stamp
    if age > allowed:
        return False, f"last worker tick {age:.1f} s ago (allowed {allowed:.0f} s)"
    try:
        asyncio.run(_ping(redis_url))
    except STORAGE_ERRORS as exc:
        return False, f"Redis does not answer: {exc}"
    except ConfigError as exc:
        return False, f"bad --redis-url: {exc}"
    return True, f"ok: last tick {age:.1f} s ago"


async def _ping(redis_url: str) -> None:
    """Any deployment mode: the primary (standalone, Sentinel) or the cluster answers."""
    backend = Backend(redis_url, max_connections=2)
    try:
        async with asyncio.timeout(4):
            await backend.start()
            await backend.client.ping()
    finally:
        await backend.aclose()
