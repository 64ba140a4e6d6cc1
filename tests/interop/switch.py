"""The switch from an old mediator to ours, as an operator makes it: with the old mediator
stopped, `mediator import` into a Redis of its own (the embedded server in a fresh data
dir), then one node of ours on the old mediator's port, advertising the same endpoints."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.servers import Node


@dataclass
class Switched:
    node: Node
    report: str  # what `mediator import` printed
    import_seconds: float
    downtime_seconds: float  # from the import's start to our node answering /readyz

    def imported(self, name: str) -> int:
        """What the import's report counts as imported under `name` (e.g. connections)."""
        for line in self.report.splitlines():
            if line.strip().startswith(name + " "):
                return int(line[len(name) + 2 :].split()[0].replace(",", ""))
        raise AssertionError(f"the import reported no {name}: {self.report}")


def import_store(
    kind: str, uri: str, key: str, data: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MEDIATOR_DATA_DIR=str(data), MEDIATOR_REDIS_URL="")
    return subprocess.run(
        [sys.executable, "-m", "mediator", "import", kind, "--wallet-uri", uri,
         "--wallet-key", key, *extra],
        env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


async def switch(
    kind: str,
    uri: str,
    key: str,
    port: int,
    endpoints: tuple[str, ...],
    data: Path,
    *extra: str,
) -> Switched:
    """Import the stopped old mediator's store (with `extra` arguments, e.g. --queue-url),
    then start our node on its `port` with its `endpoints` (HTTP first, then WebSocket).
    AssertionError with the import's output when it fails."""
    started = time.monotonic()
    result = await asyncio.to_thread(import_store, kind, uri, key, data, *extra)
    imported = time.monotonic()
    assert result.returncode == 0, result.stdout + result.stderr
    http = next(e for e in endpoints if e.startswith("http"))
    ws = next((e for e in endpoints if e.startswith("ws")), http.replace("http", "ws", 1))
    node = Node(
        "",
        port=port,
        MEDIATOR_DATA_DIR=str(data),
        MEDIATOR_ENDPOINT=http,
        MEDIATOR_WS_ENDPOINT=ws,
        MEDIATOR_OUTBOUND_ALLOW="127.0.0.0/8",  # the agents' endpoints are on loopback
        MEDIATOR_LOG_LEVEL="info",
    )
    await asyncio.to_thread(node.start, 60)
    switched = Switched(node, result.stdout, imported - started, time.monotonic() - started)
    print(  # shown with -s, and on a failure: the downtime docs/migrating.md reports
        f"switch: import {switched.import_seconds:.1f} s, node ready "
        f"{switched.downtime_seconds:.1f} s after the import started"
    )
    return switched
