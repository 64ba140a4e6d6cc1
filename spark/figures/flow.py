"""Throughput from the cumulative counters: what changed between consecutive snapshots,
summed per day (a counter that went down was reset: that interval is skipped), the peak
forward rate between two snapshots, and the days where the level of `added` shifted."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

SERIES = ("added", "delivered", "acknowledged", "expired", "dead_lettered")
CHANGE_FACTOR = 2.0  # a level this many times higher or lower is a change point
CHANGE_WINDOW = 7  # days on each side compared
CHANGE_MIN_SIDE = 3


def intervals(cluster: DataFrame) -> DataFrame:
    """One row per pair of consecutive snapshots: the counters' increase and the seconds."""
    per = cluster.groupBy("snapshot_date", "snapshot_time").agg(
        *[F.sum(s).alias(s) for s in SERIES]
    )
    w = Window.orderBy("snapshot_time")
    seconds = F.col("snapshot_time").cast("double") - F.lag("snapshot_time").over(w).cast("double")
    out = per.withColumn("seconds", seconds)
    for s in SERIES:
        out = out.withColumn(f"d_{s}", F.col(s) - F.lag(s).over(w))
    reset = F.lit(False)
    for s in SERIES:
        reset = reset | (F.col(f"d_{s}") < 0)
    return out.filter(F.col("seconds").isNotNull() & (F.col("seconds") > 0) & ~reset)


def throughput(cluster: DataFrame) -> dict[str, Any]:
    steps = intervals(cluster).cache()
    days = (
        steps.groupBy("snapshot_date")
        .agg(*[F.sum(f"d_{s}").alias(s) for s in SERIES])
        .orderBy("snapshot_date")
        .collect()
    )
    peak = steps.agg(F.max(F.col("d_added") / F.col("seconds"))).first()
    steps.unpersist()
    daily_rows = [{"date": r["snapshot_date"], **{s: int(r[s] or 0) for s in SERIES}} for r in days]
    return {
        "days": daily_rows,
        "change_points": change_points([(d["date"], d["added"]) for d in daily_rows], "added"),
        "peak_forwards_per_second": None if peak is None or peak[0] is None else float(peak[0]),
    }


def change_points(series: list[tuple[str, int]], name: str) -> list[dict[str, Any]]:
    """Days where the mean of up to 7 days after is at least twice (or half) the mean of up
    to 7 days before, each side with 3 days or more; of neighbouring days the strongest."""
    found: list[dict[str, Any]] = []
    values = [v for _, v in series]
    for i in range(CHANGE_MIN_SIDE, len(values) - CHANGE_MIN_SIDE + 1):
        before = values[max(0, i - CHANGE_WINDOW) : i]
        after = values[i : i + CHANGE_WINDOW]
        if len(before) < CHANGE_MIN_SIDE or len(after) < CHANGE_MIN_SIDE:
            continue
        b, a = sum(before) / len(before), sum(after) / len(after)
        low, high = min(a, b), max(a, b)
        strength = high / low if low > 0 else (float("inf") if high > 0 else 1.0)
        if strength < CHANGE_FACTOR:
            continue
        point = {"date": series[i][0], "series": name, "before": b, "after": a, "_s": strength}
        if found and found[-1]["_i"] >= i - CHANGE_MIN_SIDE:
            if strength > found[-1]["_s"]:
                found[-1] = {**point, "_i": i}
            continue
        found.append({**point, "_i": i})
    return [{k: v for k, v in p.items() if not k.startswith("_")} for p in found]
