"""What the figure modules share: the latest snapshot, the last snapshot of each day, the
'other' row of capped tables, and plain conversions of Spark's answers."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

DAY_MS = 86_400_000
UNLIMITED_RETENTION = 2**31 - 1


NEWEST = "_newest"  # the column `mark_newest` adds


def mark_newest(frame: DataFrame, newest: dt.datetime | None) -> DataFrame:
    """The frame with a column saying which rows are of the newest snapshot, whose time the
    history already knows: `latest` is then a filter, not a Spark job of its own."""
    return frame.withColumn(
        NEWEST, F.coalesce(F.col("snapshot_time") == F.lit(newest), F.lit(False))
    )


def latest(frame: DataFrame) -> DataFrame:
    """The rows of the newest snapshot (of a frame `mark_newest` marked)."""
    return frame.filter(F.col(NEWEST))


def daily(frame: DataFrame) -> DataFrame:
    """The rows of the last snapshot of each day."""
    last = frame.groupBy("snapshot_date").agg(F.max("snapshot_time").alias("_last"))
    joined = frame.join(last, "snapshot_date")
    return joined.filter(F.col("snapshot_time") == F.col("_last")).drop("_last")


def capped(rows: list[dict[str, Any]], top: int, sums: tuple[str, ...]) -> list[dict[str, Any]]:
    """The first `top` rows, and an `other` row summing `sums` over the rest."""
    if len(rows) <= top:
        return rows
    rest = rows[top:]
    other: dict[str, Any] = {"other": True, "count": len(rest)}
    for name in sums:
        other[name] = sum(r.get(name) or 0 for r in rest)
    return [*rows[:top], other]


def num(value: Any) -> float | None:
    return None if value is None else float(value)


def whole(value: Any) -> int:
    return 0 if value is None else int(value)
