"""The two tiers (docs/testing.md). `make check` runs the fast one: every test not marked
`full`, with no process started but the session's Redis-compatible server. A test that
starts anything else there fails at once, saying so, instead of slowing the tier down.

A test is in the full tier when it is marked `full` (its module's `pytestmark`), carries
one of the markers of real peers or images (interop, image), or uses a fixture that starts
a `mediator serve` process (conftest's node_a, node_b, dc_node and what builds on them).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

FAST = os.environ.get("MEDIATOR_TEST_TIER", "") == "fast"
FULL_MARKERS = ("full", "interop", "image")
PROCESS_FIXTURES = frozenset({"node_a", "node_b", "dc_node", "med", "peer"})
SERVER_BINARIES = ("valkey-server", "redis-server")


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if any(item.get_closest_marker(m) for m in FULL_MARKERS) or PROCESS_FIXTURES & set(
            getattr(item, "fixturenames", ())
        ):
            item.add_marker(pytest.mark.full)


class ProcessInFastTier(Exception):
    pass


def _guarded_popen(original: Any) -> Any:
    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        first = args if isinstance(args, (str, bytes, os.PathLike)) else args[0]
        if Path(os.fsdecode(first)).name not in SERVER_BINARIES:
            raise ProcessInFastTier(
                f"the fast tier starts no process but the session's Redis, and this test "
                f"started {args!r}: mark it `full` (pytestmark = pytest.mark.full), or use "
                "the in-process app (tests/inprocess.py)"
            )
        original(self, args, *rest, **kwargs)

    return init


def pytest_collection_finish(session: pytest.Session) -> None:
    """Guard the processes that run tests, once collected (not xdist's controller, which
    starts the workers; pytest itself asks `uname` while it starts)."""
    dist = session.config.getoption("dist", "no")
    controller = dist != "no" and "PYTEST_XDIST_WORKER" not in os.environ
    if FAST and not controller:
        subprocess.Popen.__init__ = _guarded_popen(subprocess.Popen.__init__)  # type: ignore[method-assign]
