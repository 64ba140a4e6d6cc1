"""`mediator worker --check`: the exec probe of a worker container."""

from __future__ import annotations

import time
from pathlib import Path

import redis

from mediator.settings import Settings


def check(settings: Settings, redis_url: str) -> tuple[bool, str]:
    """Healthy when the worker ticked recently and Redis answers."""
    path = Path(settings.worker_health_file)
    try:
        stamp = float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False, f"no worker heartbeat in {path}"
    allowed = max(10.0, 3 * settings.worker_tick_seconds, settings.lease_seconds)
    age = time.time() - stamp
    if age > allowed:
        return False, f"last worker tick {age:.1f} s ago (allowed {allowed:.0f} s)"
    try:
        redis.Redis.from_url(redis_url, socket_timeout=2, socket_connect_timeout=2).ping()
    except (redis.RedisError, OSError) as exc:
        return False, f"Redis does not answer: {exc}"
    return True, f"ok: last tick {age:.1f} s ago"
