"""A run's life: its parts within a time limit, every process stopped at the end whatever
happened (with the last lines of their logs on a failure), and the exit status: 0 when it
ran (targets missed or not), 1 when errors happened during it, 2 when it could not run,
130 when interrupted."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar

from bench.harness.errors import BenchError
from bench.harness.output import progress
from bench.harness.report import Report, document, finish
from bench.harness.servers import Servers

T = TypeVar("T")


async def guarded(
    servers: Servers, part: Awaitable[T], limit_s: float, stop: Callable[[], Awaitable[None]]
) -> T:
    """Run a benchmark's parts within `limit_s` seconds; on a failure show each process's
    last log lines; `stop` everything it started either way."""
    try:
        async with asyncio.timeout(limit_s):
            return await part
    except BaseException:
        servers.print_log_tails()
        raise
    finally:
        await stop()


def event_loop_runner(uvloop: bool) -> Callable[[Coroutine[Any, Any, T]], T]:
    """uvloop's runner when asked for and installed, else asyncio's."""
    if uvloop:
        try:
            import uvloop as fast
        except ImportError:
            return asyncio.run
        return fast.run
    return asyncio.run


def run_main(
    runner: Callable[[], tuple[Report, dict[str, Any]]],
    output_dir: str,
    prefix: str,
    failures: tuple[type[BaseException], ...] = (BenchError,),
) -> int:
    """A benchmark's exit status: `finish`'s, 2 for a failure it names, 130 interrupted."""
    try:
        report, doc = runner()
    except failures as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return finish(report, doc, output_dir, prefix)


class LongBench(Protocol):
    """A long benchmark (scale, capacity): its servers, its report, and its parts, which
    return the problems found in the servers' logs."""

    servers: Servers
    report: Report

    def run(self) -> Awaitable[list[str]]: ...

    def stop(self) -> Awaitable[None]: ...


def long_main(
    make: Callable[[], LongBench],
    kind: str,
    args: argparse.Namespace,
    parts: list[str],
    limit_s: float,
    **extra: Any,
) -> int:
    """Run the long benchmark that `make` builds (in the event loop) within `limit_s`
    seconds and write its report and JSON `document`, with `extra` fields of its own;
    `run_main`'s exit status, its own failures and RuntimeError named."""

    async def amain() -> tuple[Report, dict[str, Any]]:
        bench = make()
        started, loadavg = datetime.now(UTC), os.getloadavg()
        progress(
            f"{kind} run: {args.recipients:,} recipients, parts {parts}; load average "
            f"{loadavg[0]:.2f} ({os.cpu_count()} CPUs)"
        )
        logged = await guarded(bench.servers, bench.run(), limit_s, bench.stop)
        doc = document(
            bench.report, kind, args, bench.servers.pinning, started, loadavg, logged, **extra
        )
        return bench.report, doc

    return run_main(lambda: asyncio.run(amain()), args.output_dir, kind, (BenchError, RuntimeError))
