"""The abuse limits a benchmark's nodes run without, so that they do not cap what it
measures: set through the same MEDIATOR_* settings a deployment uses, raised out of reach
rather than set to 0 so that the nodes still count against them (their cost stays in the
figures), and named in the run's printed report and JSON."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OUT_OF_REACH = 1_000_000  # per second: far above what one node can answer


@dataclass(frozen=True)
class Limit:
    """One limit: the setting that holds it, its value in the run, and its name in the
    report."""

    setting: str
    value: int
    what: str

    def env(self) -> dict[str, str]:
        return {self.setting: str(self.value)}

    def to_json(self) -> dict[str, Any]:
        return {"setting": self.setting, "value": self.value, "what": self.what}


FORWARDS_PER_RECIPIENT = Limit(
    "MEDIATOR_LIMIT_FORWARDS_PER_SECOND", OUT_OF_REACH, "forwards per recipient per second"
)
WEBSOCKET_FRAMES = Limit(
    "MEDIATOR_WEBSOCKET_MESSAGES_PER_SECOND", OUT_OF_REACH, "WebSocket frames per second"
)
# The per-address limits (handshakes, connections, a sender's bytes, sockets per address)
# never apply to the benchmarks' clients: loopback is in --limit-exempt-networks by default.
EXEMPT = "per-address limits do not apply (loopback clients, exempt by default)"


def node_env(limits: Sequence[Limit]) -> dict[str, str]:
    """The settings that turn `limits` off on a node."""
    return {k: v for limit in limits for k, v in limit.env().items()}


def shown(limits: Sequence[Limit]) -> str:
    """The report's line, e.g. `limits off: forwards per recipient per second (...)`."""
    if not limits:
        return f"limits off: none; {EXEMPT}"
    names = ", ".join(limit.what for limit in limits)
    values = ", ".join(f"{limit.setting}={limit.value:,}" for limit in limits)
    return f"limits off: {names} (raised out of reach, still counted: {values}); {EXEMPT}"


def to_json(limits: Sequence[Limit]) -> dict[str, Any]:
    return {"off": [limit.to_json() for limit in limits], "note": EXEMPT}
