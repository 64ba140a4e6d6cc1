"""What a run reports: its result lines (printed as they come), a summary table with every
figure against its target and the abuse limits the nodes ran without, the JSON document
written to <output-dir>/<kind>-<time>.json, and the errors that make the exit status 1."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.harness import limits
from bench.harness.limits import Limit
from bench.harness.machine import machine_info
from bench.harness.output import Goal
from bench.harness.processes import Pinning


class Report:
    """The figures of a run as they are measured, and the limits its nodes ran without
    (the servers' `limits_off`)."""

    def __init__(self, limits_off: Sequence[Limit] = ()) -> None:
        self.limits_off = tuple(limits_off)
        self.results: dict[str, Any] = {}
        self.lines: list[str] = []
        self.summary: list[tuple[str, str, str, str]] = []  # figure, measured, target, status
        self.errors: list[str] = []

    def emit(self, line: str) -> None:
        """A result line: printed and kept for the JSON."""
        self.lines.append(line)
        print(line, flush=True)

    def judge(self, goals: dict[str, Goal], name: str, label: str, shown: str, value: float) -> str:
        """The verdict on a figure, added to the summary and to the JSON's verdicts."""
        goal = goals[name]
        status = goal.verdict(value)
        self.summary.append((label, shown, goal.shown, status))
        self.results.setdefault("verdicts", {})[name] = status
        return status

    def info(self, label: str, shown: str) -> None:
        """A figure with no target."""
        self.summary.append((label, shown, "(info)", ""))

    def print_summary(self) -> None:
        rows = [("workload", "measured", "target", "status"), *self.summary]
        widths = [max(len(r[i]) for r in rows) for i in range(3)]
        print("\nSummary", flush=True)
        for i, r in enumerate(rows):
            print(f"  {r[0]:<{widths[0]}}  {r[1]:<{widths[1]}}  {r[2]:<{widths[2]}}  {r[3]}")
            if i == 0:
                print("  " + "-" * (sum(widths) + 6 + 10))
        print(f"  {limits.shown(self.limits_off)}", flush=True)


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The run's options as the JSON records them (`only` sorted)."""
    return {k: v for k, v in vars(args).items() if k != "only"} | {"only": sorted(args.only)}


def document(
    report: Report,
    kind: str,
    args: argparse.Namespace,
    pinning: Pinning,
    started: datetime,
    loadavg: tuple[float, float, float],
    log_problems: list[str],
    **extra: Any,
) -> dict[str, Any]:
    """The JSON of a long benchmark (scale, capacity): its options, pinning, machine,
    results and what went wrong, with `extra` fields of its own."""
    return {
        "benchmark": kind,
        "started": started.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "seconds": (datetime.now(UTC) - started).total_seconds(),
        "options": options(args),
        "pinning": asdict(pinning),
        **extra,
        "machine": machine_info(loadavg),
        "results": report.results,
        "lines": report.lines,
        "errors": report.errors,
        "server_log_lines": log_problems[:200],
    }


def finish(report: Report, doc: dict[str, Any], output_dir: str, prefix: str) -> int:
    """The summary, the document as <output_dir>/<prefix>-<time>.json, and the exit
    status: 1 when errors happened during the run."""
    doc["limits_off"] = limits.to_json(report.limits_off)
    report.print_summary()
    out_dir = Path(output_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"{prefix}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    took = f" (run took {doc['seconds'] / 60:.1f} min)" if "seconds" in doc else ""
    print(f"\nresults written to {path}{took}")
    if doc.get("server_log_lines"):
        print(f"note: the servers logged {len(doc['server_log_lines'])} lines (see the JSON)")
    if report.errors:
        print("errors during the run:", *report.errors, sep="\n  ", file=sys.stderr)
        return 1
    return 0
