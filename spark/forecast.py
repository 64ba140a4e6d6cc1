"""Days until full: a straight line through the daily peak of the primaries' memory
(`regr_slope`, `regr_intercept`, `regr_r2` in Spark), a cone from the line's prediction
interval, and the days until the line reaches the headroom line and the capacity."""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

MIN_DAYS = 7
Z = 1.96  # ~95 % of the spread the fit leaves


def forecast(peaks: DataFrame, headroom: float, horizon_days: int) -> dict[str, Any]:
    """The fit over `peaks` (memory.daily_peaks: snapshot_date, used_memory, capacity)."""
    rows = peaks.collect()
    points = [{"date": r["snapshot_date"], "used_memory": int(r["used_memory"])} for r in rows]
    capacity = int(rows[-1]["capacity"]) if rows else None
    out: dict[str, Any] = {
        "status": "not_enough_history", "min_days": MIN_DAYS, "days_of_history": len(points),
        "slope_bytes_per_day": None, "intercept_bytes": None, "r2": None,
        "points": points, "cone": [],
        "headroom_line": None if capacity is None else headroom * capacity,
        "capacity": capacity, "days_to_headroom": None, "days_to_capacity": None,
    }  # fmt: skip
    if len(points) < MIN_DAYS:
        return out
    start = dt.date.fromisoformat(points[0]["date"])
    frame = peaks.select(
        F.datediff(F.to_date("snapshot_date"), F.lit(start)).cast("double").alias("x"),
        F.col("used_memory").cast("double").alias("y"),
    ).cache()
    fit = frame.agg(
        F.regr_slope("y", "x").alias("b"), F.regr_intercept("y", "x").alias("a"),
        F.regr_r2("y", "x").alias("r2"), F.regr_count("y", "x").alias("n"),
        F.avg("x").alias("mx"), F.regr_sxx("y", "x").alias("sxx"), F.max("x").alias("last"),
    ).first()  # fmt: skip
    assert fit is not None
    b, a, n = float(fit["b"]), float(fit["a"]), int(fit["n"])
    residual = F.pow(F.col("y") - (F.lit(a) + F.lit(b) * F.col("x")), 2)
    sse_row = frame.agg(F.sum(residual)).first()
    frame.unpersist()
    sse = float(sse_row[0]) if sse_row and sse_row[0] is not None else 0.0
    se = math.sqrt(sse / (n - 2)) if n > 2 else 0.0
    sxx, mx, last = float(fit["sxx"]), float(fit["mx"]), float(fit["last"])
    cone = []
    for k in range(1, horizon_days + 1):
        x = last + k
        mid = a + b * x
        spread = Z * se * math.sqrt(1 + 1 / n + ((x - mx) ** 2 / sxx if sxx else 0))
        day = (start + dt.timedelta(days=x)).isoformat()
        cone.append({"date": day, "low": max(0.0, mid - spread), "mid": mid, "high": mid + spread})
    now = a + b * last
    out.update(
        status="ok", slope_bytes_per_day=b, intercept_bytes=a,
        r2=None if fit["r2"] is None else float(fit["r2"]), cone=cone,
        days_to_headroom=_days_to(out["headroom_line"], now, b),
        days_to_capacity=_days_to(capacity, now, b),
    )  # fmt: skip
    return out


def _days_to(line: float | None, now: float, slope: float) -> float | None:
    """Days from the last point until the fitted line reaches `line` (0: it already has;
    None: it is not growing)."""
    if line is None:
        return None
    if now >= line:
        return 0.0
    if slope <= 0:
        return None
    return (line - now) / slope
