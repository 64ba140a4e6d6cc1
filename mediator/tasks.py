"""Stopping a task for sure.

On Python 3.11 `asyncio.wait_for` can swallow a cancellation that arrives as the awaited
call completes (CPython issue 86296), and redis-py wraps every command in it: a task that
loops over Redis calls may survive one `cancel()`. `stop` cancels again until the task is
done, within a bound, so a node or worker that was told to stop does.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

log = logging.getLogger(__name__)


async def stop(
    tasks: asyncio.Task[object] | Iterable[asyncio.Task[object]], seconds: float = 5.0
) -> None:
    """Cancel `tasks` and wait for them, cancelling again every 0.1 s while any runs on;
    after `seconds`, give up on those (logged) rather than hang."""
    pending = {tasks} if isinstance(tasks, asyncio.Task) else set(tasks)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while True:
        pending = {t for t in pending if not t.done()}
        if not pending:
            return
        if loop.time() >= deadline:
            names = sorted(t.get_name() for t in pending)
            log.warning("tasks did not stop in %.0f s: %s", seconds, names)
            return
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=0.1)
