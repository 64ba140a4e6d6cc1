"""The report's figures, computed a second time and independently: the real CLI runs the Spark
job on a synthetic history, and this module reads the same Parquet with pandas and works out
each figure of `summary.json` from its definition alone (spark/SUMMARY.md), without the Spark
code's help. Where the two disagree, one of them is wrong."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.dataset as ds
import pytest

from tests.capacity.synthetic import write_history

pytestmark = [pytest.mark.timeout(1800), pytest.mark.full]

REL = 1e-9
HOUR_MS = 3600_000
DAY_MS = 86_400_000
NO_RETENTION = 2147483647
HEADROOM = 0.6
SLOPE = 50e6
BUCKETS = ["empty", "< 1 h", "1-6 h", "6-24 h", "1-7 d", "7-30 d", "> 30 d"]
BUCKET_LIMITS_MS = [HOUR_MS, 6 * HOUR_MS, 24 * HOUR_MS, 7 * DAY_MS, 30 * DAY_MS]
COUNTERS = ["added", "delivered", "acknowledged", "expired", "dead_lettered"]


@dataclass(frozen=True)
class Run:
    """One report over one synthetic history: its summary and the Parquet it read."""

    primaries: int
    summary: dict[str, Any]
    mailboxes: pd.DataFrame
    servers: pd.DataFrame
    cluster: pd.DataFrame

    @property
    def newest(self) -> pd.DataFrame:
        """The mailboxes of the newest snapshot."""
        return _newest(self.mailboxes)


def _report(history: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """`mediator capacity report` exactly as an SRE runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mediator", "capacity", "report", "--history", str(history),
         "--out", str(out)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _summary(history: Path, out: Path) -> dict[str, Any]:
    done = _report(history, out)
    assert done.returncode == 0, done.stderr[-3000:]
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def _table(history: Path, name: str) -> pd.DataFrame:
    data = ds.dataset(history / name, format="parquet", partitioning="hive")
    frame: pd.DataFrame = data.to_table().to_pandas()
    return frame


def _newest(frame: pd.DataFrame) -> pd.DataFrame:
    return frame[frame["snapshot_time"] == frame["snapshot_time"].max()]


@pytest.fixture(scope="module", params=[3, 1], ids=["3-primaries", "1-primary"])
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Run:
    primaries: int = request.param
    root = tmp_path_factory.mktemp(f"report-{primaries}")
    history = root / "history"
    write_history(history, days=30, skip=(12,), mailboxes=400, primaries=primaries, slope=SLOPE)
    summary = _summary(history, root / "out")
    return Run(
        primaries,
        summary,
        _table(history, "mailboxes"),
        _table(history, "servers"),
        _table(history, "cluster"),
    )


def _held(frame: pd.DataFrame) -> pd.Series:
    return frame["stored"].fillna(0) + frame["delayed"].fillna(0)


def _distribution(values: pd.Series) -> dict[str, float]:
    array = values.to_numpy(dtype=float)
    p50, p95, p99 = np.percentile(array, [50, 95, 99], method="linear")
    return {
        "total": float(array.sum()),
        "p50": float(p50),
        "p95": float(p95),
        "p99": float(p99),
        "max": float(array.max()),
    }


def _thresholds(top: int) -> list[int]:
    """1, 2, 5, 10, 20, 50, ... up to `top`."""
    out: list[int] = []
    scale = 1
    while True:
        for step in (1, 2, 5):
            t = step * scale
            if t > top:
                return out
            out.append(t)
        scale *= 10


def _gini(sizes: list[int]) -> float:
    x = sorted(sizes)
    n = len(x)
    weighted = sum(i * v for i, v in enumerate(x, start=1))
    return 2 * weighted / (n * sum(x)) - (n + 1) / n


def _lorenz(sizes: list[int]) -> list[tuple[float, float]]:
    x = sorted(sizes)
    n, total = len(x), sum(x)
    cumulative = np.cumsum(x)
    points = [(0.0, 0.0)]
    seen: set[int] = set()
    for k in range(1, 101):
        i = max(1, round(n * k / 100))
        if i in seen:
            continue
        seen.add(i)
        points.append((i / n, float(cumulative[i - 1]) / total))
    return points


def _bucket(age_ms: float | None) -> int:
    if age_ms is None:
        return 0
    for index, limit in enumerate(BUCKET_LIMITS_MS, start=1):
        if age_ms < limit:
            return index
    return len(BUCKETS) - 1


def _ages(frame: pd.DataFrame) -> list[float | None]:
    return [
        None if pd.isna(oldest) else float(read) - float(oldest)
        for read, oldest in zip(frame["read_ms"], frame["oldest_ms"], strict=True)
    ]


def _primaries(servers: pd.DataFrame) -> pd.DataFrame:
    return servers[servers["role"] == "primary"]


def _capacity(servers: pd.DataFrame) -> int:
    primaries = _primaries(_newest(servers))
    return sum(
        int(m) if m > 0 else int(s)
        for m, s in zip(primaries["maxmemory"], primaries["total_system_memory"], strict=True)
    )


def _daily_peaks(servers: pd.DataFrame) -> list[tuple[str, int]]:
    primaries = _primaries(servers)
    per_snapshot = primaries.groupby(["snapshot_date", "snapshot_time"])["used_memory"].sum()
    per_day = per_snapshot.groupby(level="snapshot_date").max().sort_index()
    return [(str(day), int(used)) for day, used in per_day.items()]


def _fit(points: list[tuple[str, int]]) -> tuple[float, float, float, float]:
    """Least squares over days since the first date: slope, intercept, R² and the last x."""
    first = dt.date.fromisoformat(points[0][0])
    x = np.array([(dt.date.fromisoformat(d) - first).days for d, _ in points], dtype=float)
    y = np.array([used for _, used in points], dtype=float)
    slope, intercept = np.polyfit(x, y, 1)
    fitted = intercept + slope * x
    r2 = 1 - float(((y - fitted) ** 2).sum()) / float(((y - y.mean()) ** 2).sum())
    return float(slope), float(intercept), r2, float(x[-1])


def _counter_intervals(cluster: pd.DataFrame) -> list[tuple[str, float, dict[str, int]]]:
    """Consecutive snapshots' counter differences (summed over namespaces), with the later
    snapshot's date and the seconds between; an interval where a counter went down is left
    out."""
    totals = cluster.groupby(["snapshot_time", "snapshot_date"])[COUNTERS].sum().sort_index()
    rows = list(totals.iterrows())
    out = []
    for (before_key, before), (after_key, after) in itertools.pairwise(rows):
        delta = {c: int(after[c]) - int(before[c]) for c in COUNTERS}
        if any(v < 0 for v in delta.values()):
            continue
        seconds = (after_key[0] - before_key[0]).total_seconds()
        out.append((str(after_key[1]), seconds, delta))
    return out


def test_mailbox_counts(run: Run) -> None:
    newest = run.newest
    got = run.summary["mailboxes"]
    assert got["count"] == len(newest)
    assert got["didcomm"] == int((newest["namespace"] == "didcomm").sum())
    assert got["mqs"] == int((newest["namespace"] == "mqs").sum())
    assert got["didcomm_v2"] == int((newest["handshake_protocol"] == "didcomm/v2").sum()) > 0


@pytest.mark.parametrize("figure", ["messages", "bytes"])
def test_distribution(run: Run, figure: str) -> None:
    values = _held(run.newest) if figure == "messages" else run.newest["bytes"]
    want = _distribution(values)
    got = run.summary["mailboxes"][figure]
    assert set(got) == set(want)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=REL, abs=1e-12), name


def test_ccdf(run: Run) -> None:
    held = _held(run.newest)
    count = len(held)
    want = [
        {"messages": t, "share": int((held >= t).sum()) / count}
        for t in _thresholds(int(held.max()))
    ]
    got = run.summary["mailboxes"]["ccdf"]
    assert [p["messages"] for p in got] == [p["messages"] for p in want]
    for g, w in zip(got, want, strict=True):
        assert g["share"] == pytest.approx(w["share"], rel=REL), g["messages"]


def test_concentration(run: Run) -> None:
    sizes = [int(b) for b in run.newest["bytes"]]
    got = run.summary["mailboxes"]
    assert got["gini"] == pytest.approx(_gini(sizes), rel=REL)
    top = math.ceil(len(sizes) / 100)
    assert got["top1_bytes_share"] == pytest.approx(sum(sorted(sizes)[-top:]) / sum(sizes), rel=REL)
    want = _lorenz(sizes)
    assert len(got["lorenz"]) == len(want)
    for g, (share, held) in zip(got["lorenz"], want, strict=True):
        assert g["mailboxes"] == pytest.approx(share, rel=REL, abs=1e-12)
        assert g["bytes"] == pytest.approx(held, rel=REL, abs=1e-12)


def test_age_days(run: Run) -> None:
    frame = run.mailboxes
    want = []
    for day, rows in sorted(frame.groupby("snapshot_date"), key=lambda kv: str(kv[0])):
        last = _newest(rows)
        counts = [0] * len(BUCKETS)
        for age in _ages(last):
            counts[_bucket(age)] += 1
        want.append({"date": str(day), "counts": counts})
    assert run.summary["age"]["buckets"] == BUCKETS
    assert run.summary["age"]["days"] == want


def test_past_horizon(run: Run) -> None:
    newest = run.newest
    want = sum(
        1
        for age, retention in zip(_ages(newest), newest["retention_seconds"], strict=True)
        if age is not None and retention < NO_RETENTION and age > retention * 1000
    )
    assert run.summary["age"]["past_horizon"] == want


def test_staleness(run: Run) -> None:
    newest = run.newest
    holding = newest[_held(newest) > 0]
    since = holding["last_delivered_ms"].where(
        holding["last_delivered_ms"].notna(), holding["created_ms"]
    )
    idle = holding["read_ms"] - since
    want = [
        {
            "days": n,
            "mailboxes": int((idle >= n * DAY_MS).sum()),
            "bytes": int(holding.loc[idle >= n * DAY_MS, "bytes"].sum()),
        }
        for n in (7, 30, 90)
    ]
    assert run.summary["staleness"] == want


def test_inflight(run: Run) -> None:
    newest = run.newest
    counts = [int(c) for row in newest["inflight_delivery_counts"] for c in row]
    histogram = pd.Series(counts).value_counts().sort_index()
    redelivered = sum(1 for row in newest["inflight_delivery_counts"] if any(c >= 3 for c in row))
    got = run.summary["inflight"]
    assert got["messages"] == int(newest["in_flight"].sum())
    assert got["mailboxes"] == int((newest["in_flight"] > 0).sum())
    assert got["histogram"] == [
        {"deliveries": int(d), "messages": int(n)} for d, n in histogram.items()
    ]
    assert got["max_deliveries"] == max(counts)
    assert got["redelivered_mailboxes"] == redelivered


def test_dead_letters(run: Run) -> None:
    newest = run.newest
    dlq = newest[(newest["namespace"] == "mqs") & (newest["dead_letter_sources"].fillna(0) > 0)]
    dlq = dlq.sort_values(["stored", "name"], ascending=[False, True])
    want = [
        {"queue": name, "messages": int(held), "bytes": int(size), "sources": int(sources)}
        for name, held, size, sources in zip(
            dlq["name"], _held(dlq), dlq["bytes"], dlq["dead_letter_sources"], strict=True
        )
    ]
    assert want, "the synthetic history has dead letter queues"
    got = [{k: q[k] for k in ("queue", "messages", "bytes", "sources")} for q in
           run.summary["dead_letters"]]  # fmt: skip
    assert got == want


def test_live(run: Run) -> None:
    live = run.newest[run.newest["live"].fillna(False).astype(bool)]
    backlog = live[live["visible"] > 0]
    got = run.summary["live"]
    assert got["sockets"] == len(live)
    assert got["with_backlog"] == len(backlog)
    assert got["backlog_messages"] == int(backlog["visible"].sum())


def test_throughput(run: Run) -> None:
    intervals = _counter_intervals(run.cluster)
    per_day: dict[str, dict[str, int]] = {}
    for day, _, delta in intervals:
        sums = per_day.setdefault(day, dict.fromkeys(COUNTERS, 0))
        for c in COUNTERS:
            sums[c] += delta[c]
    want = [{"date": day, **per_day[day]} for day in sorted(per_day)]
    got = run.summary["throughput"]
    assert got["days"] == want
    peak = max(delta["added"] / seconds for _, seconds, delta in intervals)
    assert got["peak_forwards_per_second"] == pytest.approx(peak, rel=REL)


def test_forecast_fit(run: Run) -> None:
    points = _daily_peaks(run.servers)
    slope, intercept, r2, _ = _fit(points)
    got = run.summary["forecast"]
    assert got["status"] == "ok"
    assert got["points"] == [{"date": d, "used_memory": u} for d, u in points]
    assert got["slope_bytes_per_day"] == pytest.approx(slope, rel=REL)
    assert got["slope_bytes_per_day"] == pytest.approx(SLOPE, rel=0.01)
    assert got["intercept_bytes"] == pytest.approx(intercept, rel=REL)
    assert got["r2"] == pytest.approx(r2, rel=REL)
    assert got["capacity"] == _capacity(run.servers)
    assert got["headroom_line"] == pytest.approx(HEADROOM * _capacity(run.servers), rel=REL)


def test_days_to_headroom(run: Run) -> None:
    slope, intercept, _, x_last = _fit(_daily_peaks(run.servers))
    assert slope > 0
    line = HEADROOM * _capacity(run.servers)
    # Already past the line (the 1-primary case): 0 days, not a negative count.
    want = max(0.0, (line - (intercept + slope * x_last)) / slope)
    assert run.summary["forecast"]["days_to_headroom"] == pytest.approx(want, rel=REL, abs=1e-9)


def test_coverage(run: Run) -> None:
    got = run.summary["coverage"]
    assert got["mailboxes_read"] == int(_newest(run.cluster)["rows"].sum())
    assert got["memory_sampled_mailboxes"] == int(run.newest["memory_sampled"].sum())


def test_history_gaps(run: Run) -> None:
    dates = {
        dt.date.fromisoformat(str(d))
        for table in (run.mailboxes, run.servers, run.cluster)
        for d in table["snapshot_date"].unique()
    }
    first, last = min(dates), max(dates)
    days = [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]
    got = run.summary["history"]
    assert got["first_date"] == first.isoformat()
    assert got["last_date"] == last.isoformat()
    assert got["days_with_data"] == len(dates)
    assert got["gaps"] == [d.isoformat() for d in days if d not in dates]
    assert got["gaps"] == ["2026-10-13"]  # the skipped day 12


def test_verdict(run: Run) -> None:
    verdict = run.summary["verdict"]
    assert verdict["status"] in {"under", "right", "over"}
    assert verdict["primaries_now"] == len(_primaries(_newest(run.servers)))
    assert verdict["primaries_now"] == run.primaries
    if run.primaries == 1:
        assert verdict["recommended_primaries"] == 1


def test_short_history_has_no_forecast(tmp_path: Path) -> None:
    write_history(tmp_path / "history", days=3, mailboxes=400)
    summary = _summary(tmp_path / "history", tmp_path / "out")
    assert summary["forecast"]["status"] == "not_enough_history"
    notices = [n.lower() for n in summary["notices"]]
    assert any("history" in n and ("at least" in n or "too short" in n) for n in notices), notices


def test_one_day_of_history(tmp_path: Path) -> None:
    write_history(tmp_path / "history", days=1, mailboxes=400)
    summary = _summary(tmp_path / "history", tmp_path / "out")
    assert summary["forecast"]["status"] == "not_enough_history"
    assert any("only one day" in n.lower() for n in summary["notices"]), summary["notices"]
