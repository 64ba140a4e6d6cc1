"""The report job: the history's figures (figures/, SUMMARY.md) into one offline HTML page and
summary.json.

    mediator capacity report --history HISTORY_DIR --out REPORT_DIR
    spark-submit spark/report.py --history HISTORY_DIR --out REPORT_DIR
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from spark import progress
from spark.figures import common, coverage, flow, mailboxes, memory
from spark.forecast import MIN_DAYS, forecast
from spark.history import History, HistoryError, load
from spark.verdict import verdict

JOB = "report"
SUMMARY_VERSION = 1


@dataclass(frozen=True)
class ReportOptions:
    history: str
    out: str
    master: str | None = None
    days: int = 30
    memory_headroom: float = 0.6
    node_forwards_per_second: float = 3000
    horizon_days: int = 30
    top: int = 20
    driver_memory: str = "2g"


@dataclass(frozen=True)
class ReportResult:
    html: Path
    html_bytes: int
    summary: Path
    notices: list[str] = field(default_factory=list)


def run(options: ReportOptions) -> ReportResult:
    from spark.page import render
    from spark.session import start

    spark = start("mediator capacity report", options.master, driver_memory=options.driver_memory)
    progress.phase(JOB, f"reading {options.days} days of history from {options.history}")
    history = load(spark, options.history, options.days)
    progress.phase(
        JOB, f"{len(history.snapshots)} snapshots over {len(history.dates)} days; computing"
    )
    try:
        summary = figures(spark, history, options)
    except Exception as e:  # a data page that cannot be read shows only when it is read
        from spark.failures import explain

        reason = explain(e)
        if reason is None:
            raise
        raise HistoryError(f"cannot read the history at {options.history}: {reason}") from None
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    summary_path = out / "summary.json"
    summary_path.write_text(json.dumps(summary, indent=1, default=_json) + "\n")
    html = out / "report.html"
    html.write_text(render(json.loads(summary_path.read_text())))
    progress.phase(JOB, f"wrote {html} and {summary_path.name}")
    return ReportResult(html, html.stat().st_size, summary_path, summary["notices"])


def _json(value: Any) -> Any:
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    raise TypeError(f"not JSON: {value!r}")


def figures(spark: SparkSession, history: History, options: ReportOptions) -> dict[str, Any]:
    headroom = options.memory_headroom
    newest = history.snapshots[-1] if history.snapshots else None
    mb, srv, cl = (
        common.mark_newest(f, newest).cache()
        for f in (history.mailboxes, history.servers, history.cluster)
    )
    peaks = memory.daily_peaks(srv)
    snapshots = [r.asDict() for r in memory.per_snapshot(srv).orderBy("snapshot_time").collect()]
    out: dict[str, Any] = {
        "schema_version": SUMMARY_VERSION,
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "history": _history(history, options.days, cl),
        "notices": notices(history, cl),
        "forecast": forecast(peaks, headroom, options.horizon_days),
        "servers": memory.servers(srv, headroom),
        "mailboxes": mailboxes.sizes(mb, options.top),
        "age": mailboxes.ages(mb),
        "staleness": mailboxes.staleness(mb),
        "inflight": mailboxes.inflight(mb),
        "dead_letters": mailboxes.dead_letters(mb, options.top),
        "live": mailboxes.live(mb, options.top),
        "skew": memory.skew(srv, mb),
        "throughput": flow.throughput(cl),
        "coverage": coverage.coverage(mb, cl),
    }
    nodes = common.latest(cl).agg(F.max("nodes_alive")).first()
    out["nodes_alive"] = None if nodes is None else nodes[0]
    out["verdict"] = verdict(
        out, snapshots, headroom=headroom, horizon_days=options.horizon_days,
        node_rate=options.node_forwards_per_second,
    )  # fmt: skip
    del out["nodes_alive"]
    order = ["schema_version", "generated_at", "history", "notices", "verdict", "forecast"]
    return {k: out[k] for k in order} | {k: v for k, v in out.items() if k not in order}


def _history(history: History, days: int, cluster: Any) -> dict[str, Any]:
    gaps: list[str] = []
    if history.first_date and history.last_date:
        day = dt.date.fromisoformat(history.first_date)
        present = set(history.dates)
        while day < dt.date.fromisoformat(history.last_date):
            if day.isoformat() not in present:
                gaps.append(day.isoformat())
            day += dt.timedelta(days=1)
    mode = common.latest(cluster).agg(F.first("mode")).first()
    latest = history.snapshots[-1].strftime("%Y-%m-%dT%H:%M:%SZ") if history.snapshots else None
    return {
        "path": history.path, "days_requested": days, "first_date": history.first_date,
        "last_date": history.last_date, "snapshots": len(history.snapshots),
        "days_with_data": len(history.dates), "gaps": gaps, "latest_snapshot_time": latest,
        "mode": None if mode is None else mode[0],
    }  # fmt: skip


def notices(history: History, cluster: Any) -> list[str]:
    out = []
    if history.empty:
        out.append(
            "The history holds no snapshot yet: run `mediator capacity snapshot` (daily, for "
            "example) and this report fills in."
        )
    elif len(history.dates) == 1:
        out.append(
            f"Only one day of history ({history.dates[0]}): this shows that day; trends, "
            f"the forecast and daily throughput need at least {MIN_DAYS} days."
        )
    elif len(history.dates) < MIN_DAYS:
        out.append(f"{len(history.dates)} days of history: the forecast needs at least {MIN_DAYS}.")
    keys = cluster.select("hash_key_id").distinct().count() if not history.empty else 0
    if keys > 1:
        out.append(
            "The mailbox pseudonym key changed within the window: the same mailbox may appear "
            "under two names in trends."
        )
    return out


if __name__ == "__main__":  # spark-submit spark/report.py ...
    from spark.cli import report_command

    report_command(prog_name="report.py")
