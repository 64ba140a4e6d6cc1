"""The two tiers (docs/testing.md). `make check` runs the fast one: every test not marked
`full`, with no process started but the session's Redis-compatible server. A test that
starts anything else there fails at once, saying so, instead of slowing the tier down.

A test is in the full tier when it is marked `full` (its module's `pytestmark`), carries
one of the markers of real peers or images (interop, image), or uses a fixture that starts
a `mediator serve` process (conftest's node_a, node_b, dc_node and what builds on them).

Under xdist (`make test`), a module's tests run on one worker, so that its module-scoped
servers start once, and the modules that run Spark share one worker, one JVM at a time
(`ModuleGroups`).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

FAST = os.environ.get("MEDIATOR_TEST_TIER", "") == "fast"
FULL_MARKERS = ("full", "interop", "image")
PROCESS_FIXTURES = frozenset({"node_a", "node_b", "dc_node"})
SERVER_BINARIES = ("valkey-server", "redis-server")
# The modules that start Spark jobs (a JVM each, 1-2 GB and both cores while it plans): one
# worker runs them all, one after the other.
SPARK_MODULES = frozenset(
    {
        "tests/capacity/test_bad_input.py",
        "tests/capacity/test_report_browser.py",
        "tests/capacity/test_report_figures.py",
        "tests/capacity/test_snapshot.py",
        "tests/kube/test_pods_run.py",
    }
)


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


def module_group(nodeid: str) -> str:
    """The unit of work a test belongs to under xdist: its module, or the Spark modules'."""
    module = nodeid.split("::", 1)[0]
    return "spark" if module in SPARK_MODULES else module


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` with the Spark modules as one unit. (xdist's own `loadgroup` renames
    node ids, which pytest 9.2's items no longer take: it would spread a group.)"""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return module_group(nodeid)

    return ModuleGroups(config, log)


# What starts first under xdist: the longest units (the Spark modules, one worker's work for
# minutes; the real wallets), so that no worker is left with them at the end.
FIRST = ("spark", "tests/interop/")


class LongestFirst:
    @pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixtures
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        def rank(item: pytest.Item) -> int:
            group = module_group(item.nodeid)
            return next((i for i, p in enumerate(FIRST) if group.startswith(p)), len(FIRST))

        items.sort(key=rank)  # stable: the rest keeps its order


def pytest_configure(config: pytest.Config) -> None:
    if "PYTEST_XDIST_WORKER" in os.environ:  # each worker collects; all sort alike
        config.pluginmanager.register(LongestFirst(), "longest-first")
