"""What the fuzzer watches besides the answers: the nodes' logs (tracebacks, unexpected
errors, stopped loops) and their resident memory over the run."""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.servers import Node

# A handler that raised (the pipeline's catch-all), a socket loop or delivery loop that
# ended by an exception, or anything else that printed a traceback.
CRASH_LINES = re.compile(
    r"unexpected error|Exception in ASGI application|delivery loop stopped|"
    r"Traceback \(most recent call last\)|--- Logging error ---"
)


@dataclass
class LogWatch:
    """Reads each node's log as it grows and counts the lines that mean a crash."""

    nodes: list[Node]
    offsets: dict[str, int] = field(default_factory=dict)
    crashes: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def scan(self) -> int:
        for node in self.nodes:
            path = Path(node.log.name)
            start = self.offsets.get(node.log.name, 0)
            with path.open("rb") as log:
                log.seek(start)
                text = log.read().decode("utf-8", "replace")
            self.offsets[node.log.name] = start + len(text.encode("utf-8", "replace"))
            lines = text.splitlines()
            for i, line in enumerate(lines):
                found = CRASH_LINES.search(line)
                if found:
                    self.crashes[found.group(0)] += 1
                    if len(self.examples) < 5:
                        self.examples.append("\n".join(lines[i : i + 40])[-4000:])
        return self.total

    @property
    def total(self) -> int:
        """Crashes counted once each: a traceback follows its "unexpected error" line."""
        return max(
            self.crashes["Traceback (most recent call last)"],
            sum(n for k, n in self.crashes.items() if not k.startswith("Traceback")),
        )


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class RssSeries:
    """VmRSS of each node, sampled with the inputs sent so far."""

    nodes: list[Node]
    samples: list[tuple[float, int, list[int]]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)

    def sample(self, inputs: int) -> None:
        values = [rss_kib(n.proc.pid) if n.proc is not None else 0 for n in self.nodes]
        self.samples.append((time.monotonic() - self.started, inputs, values))

    def after_warmup(self, warm_inputs: int) -> list[tuple[float, int, list[int]]]:
        return [s for s in self.samples if s[1] >= warm_inputs]

    def drift(self, warm_inputs: int) -> list[float]:
        """Per node, the largest deviation after warm-up from the first sample after it,
        as a fraction (0.05 is 5 %); empty when there are fewer than three such samples."""
        later = self.after_warmup(warm_inputs)
        if len(later) < 3:
            return []
        base = later[0][2]
        return [
            max(abs(s[2][i] - base[i]) / base[i] for s in later) if base[i] else 0.0
            for i in range(len(base))
        ]

    def show(self) -> str:
        step = max(1, len(self.samples) // 12)
        rows = self.samples[::step] + ([self.samples[-1]] if len(self.samples) % step else [])
        return "  ".join(
            f"{int(t)}s/{n}:" + "/".join(f"{v // 1024}M" for v in values) for t, n, values in rows
        )
