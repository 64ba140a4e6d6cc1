"""Reading the history the snapshots wrote, and refusing what cannot be trusted: a missing or
unreadable table, a snapshot one table has and another lacks (it did not finish), a schema
newer than this code. A history folder with no snapshot yet is not an error: the report
says so."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from mediator.errors import MediatorError
from spark.tables.cluster import CLUSTER
from spark.tables.columns import PARTITION_COLUMN, SCHEMA_VERSION
from spark.tables.mailboxes import MAILBOXES
from spark.tables.servers import SERVERS

TABLES = (MAILBOXES.name, SERVERS.name, CLUSTER.name)


class HistoryError(MediatorError):
    """The history cannot be read, or not trusted."""


@dataclass
class History:
    path: str
    mailboxes: DataFrame
    servers: DataFrame
    cluster: DataFrame
    dates: list[str]  # days with a snapshot in the window, oldest first
    snapshots: list[dt.datetime]  # snapshot times in the window, oldest first
    first_date: str | None
    last_date: str | None

    @property
    def empty(self) -> bool:
        return not self.snapshots


def load(spark: SparkSession, path: str, days: int) -> History:
    local = "://" not in path or path.startswith("file://")
    root = Path(path.removeprefix("file://"))
    if local and not root.is_dir():
        raise HistoryError(f"no history folder at {path}")
    present = [t for t in TABLES if not local or (root / t).exists()]
    if local and not present:
        return _empty(spark, path)
    missing = sorted(set(TABLES) - set(present))
    if missing:
        raise HistoryError(
            f"the history at {path} lacks its {', '.join(missing)} table: it was not written "
            "by `mediator capacity snapshot`, or only in part"
        )
    # The cluster table first: it vouches for a mailboxes table that holds no file yet (a
    # deployment snapshotted before its first queue).
    frames = {t: _read(spark, path, t) for t in ("cluster", "servers")}
    frames["mailboxes"] = _read(spark, path, "mailboxes", empty_ok=local)
    inventory = {t: _inventory(f, t, path) for t, f in frames.items()}
    _check_versions(inventory, path)
    _check_complete(inventory, path)
    dates = sorted({day for day, _ in inventory["cluster"]})
    window = _window(dates, days)
    framed = {t: f.filter(F.col(PARTITION_COLUMN).isin(window)) for t, f in frames.items()}
    times = sorted({v["time"] for (day, _), v in inventory["cluster"].items() if day in window})
    return History(
        path, framed["mailboxes"], framed["servers"], framed["cluster"], window,
        [_utc(t) for t in times], window[0] if window else None, window[-1] if window else None,
    )  # fmt: skip


def _utc(t: dt.datetime) -> dt.datetime:
    return t.replace(tzinfo=dt.UTC) if t.tzinfo is None else t.astimezone(dt.UTC)


def _window(dates: list[str], days: int) -> list[str]:
    if not dates:
        return []
    last = dt.date.fromisoformat(dates[-1])
    first = last - dt.timedelta(days=days - 1)
    return [d for d in dates if dt.date.fromisoformat(d) >= first]


def _read(spark: SparkSession, path: str, table: str, *, empty_ok: bool = False) -> DataFrame:
    where = f"{path.rstrip('/')}/{table}"
    if empty_ok and not any(Path(where.removeprefix("file://")).rglob("*.parquet")):
        return _frames(spark)[0]
    try:
        frame = spark.read.option("basePath", where).parquet(where)
    except Exception as e:
        raise HistoryError(f"cannot read the {table} table at {where}: {_reason(e)}") from None
    needed = {"schema_version", "snapshot_time", PARTITION_COLUMN, "snapshot_id"}
    if not needed <= set(frame.columns):
        raise HistoryError(
            f"{where} is not a capacity history table (it lacks "
            f"{', '.join(sorted(needed - set(frame.columns)))})"
        )
    return frame


def _reason(error: Exception) -> str:
    from spark.failures import explain

    return explain(error) or str(error).splitlines()[0]


Snapshots = dict[tuple[str, str], dict[str, Any]]


def _inventory(frame: DataFrame, table: str, path: str) -> Snapshots:
    """(day, snapshot id) -> its newest schema version, time and rows (the cluster table's
    count of mailboxes): one pass that reads every file, so a corrupt one shows here."""
    rows = F.sum("rows") if table == "cluster" else F.count("*")
    try:
        found = (
            frame.groupBy(PARTITION_COLUMN, "snapshot_id")
            .agg(
                F.max("schema_version").alias("version"),
                F.max("snapshot_time").alias("time"),
                rows.alias("rows"),
            )
            .collect()
        )
    except Exception as e:
        raise HistoryError(f"cannot read the {table} table at {path}: {_reason(e)}") from None
    return {(r[0], r[1]): {"version": r[2], "time": r[3], "rows": r[4]} for r in found}


def _check_versions(inventory: dict[str, Snapshots], path: str) -> None:
    for table, snapshots in inventory.items():
        version = max((v["version"] or 0 for v in snapshots.values()), default=0)
        if version > SCHEMA_VERSION:
            raise HistoryError(
                f"the {table} table at {path} has schema version {version}, written by a newer "
                f"release; this one reads version {SCHEMA_VERSION} and older: upgrade it"
            )


def _check_complete(inventory: dict[str, Snapshots], path: str) -> None:
    """Every snapshot is in all three tables (mailboxes may lack one only when the cluster
    table says the deployment had no queue then)."""
    everything = set().union(*(set(s) for s in inventory.values()))
    for day, snapshot in sorted(everything):
        lacking = [t for t in ("servers", "cluster") if (day, snapshot) not in inventory[t]]
        expected = (inventory["cluster"].get((day, snapshot)) or {}).get("rows") or 0
        if expected > 0 and (day, snapshot) not in inventory["mailboxes"]:
            lacking.insert(0, "mailboxes")
        if lacking:
            raise HistoryError(
                f"the snapshot of {day} ({snapshot}) at {path} is incomplete: its "
                f"{', '.join(lacking)} data is missing. Run the snapshot again with "
                f"--snapshot-time for that time, or delete its snapshot_id={snapshot} folders"
            )


def _frames(spark: SparkSession) -> list[DataFrame]:
    """Empty mailboxes, servers and cluster frames with the history's columns."""
    keyed = [
        T.StructField("schema_version", T.IntegerType()),
        T.StructField("snapshot_time", T.TimestampType()),
        T.StructField(PARTITION_COLUMN, T.StringType()),
        T.StructField("snapshot_id", T.StringType()),
    ]
    return [
        spark.createDataFrame([], T.StructType(keyed + list(t.spark_schema.fields)))
        for t in (MAILBOXES, SERVERS, CLUSTER)
    ]


def _empty(spark: SparkSession, path: str) -> History:
    frames = _frames(spark)
    return History(path, frames[0], frames[1], frames[2], [], [], None, None)
