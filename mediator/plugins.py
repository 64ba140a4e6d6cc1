"""What plugs into the mediator from the packages above it, found through entry points (as
pytest and flake8 find theirs), so that nothing under mediator/ imports them:

    mediator.commands       click commands added to `mediator` (`worker`, `capacity`)
    mediator.node_services  background services a node runs beside its routes (the
                            in-process upkeep worker): a callable given the node's parts,
                            returning a NodeService, or None when the settings turn it off

pyproject.toml declares them; an installed distribution of this project always has both.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # `mediator --help` loads the commands without the node's modules
    from mediator.mediation.push import Pusher
    from mediator.notify.notifier import Notifier
    from mediator.ops.metrics import Metrics
    from mediator.runtime import Runtime

log = logging.getLogger(__name__)

COMMANDS = "mediator.commands"
NODE_SERVICES = "mediator.node_services"


@dataclass(frozen=True)
class NodeParts:
    """What a node shares with the services it runs: its runtime (connection, engine,
    identity, settings), and the pusher, notifier and metrics its routes use."""

    runtime: Runtime
    pusher: Pusher
    notifier: Notifier
    metrics: Metrics


class NodeService(Protocol):
    """A background service of a node: `run` until `stop` is called (or it is cancelled)."""

    name: str

    async def run(self) -> None: ...

    def stop(self) -> None: ...


NodeServiceFactory = Callable[[NodeParts], NodeService | None]


def _load(group: str) -> list[Any]:
    found = []
    for entry in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            found.append(entry.load())
        except ImportError as exc:  # e.g. the capacity jobs without their extra
            log.debug("entry point %s of %s not loaded: %s", entry.name, group, exc)
    return found


def commands() -> list[Any]:
    """The click commands the installed packages add to `mediator`."""
    return _load(COMMANDS)


def node_services(parts: NodeParts) -> list[NodeService]:
    """The background services a node runs, as their factories decide from the settings."""
    services = []
    for factory in _load(NODE_SERVICES):
        service = factory(parts)
        if service is not None:
            services.append(service)
    return services
