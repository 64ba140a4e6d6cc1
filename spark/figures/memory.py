"""Memory: each server's headroom and fragmentation, the daily peak of all primaries that the
forecast fits, and slot/shard skew between primaries."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark.figures.common import latest, num, whole
from spark.source.topology import shard_slot

SLOT_BUCKETS = 64
SKEW_THRESHOLD = 1.2
FRAGMENTED = 1.5


def _capacity() -> Column:
    """What a server may use: its maxmemory, else the host's memory."""
    return F.when(F.col("maxmemory") > 0, F.col("maxmemory")).otherwise(
        F.col("total_system_memory")
    )


def servers(frame: DataFrame, headroom: float) -> list[dict[str, Any]]:
    rows = (
        latest(frame)
        .withColumn("capacity", _capacity())
        .withColumn("used_share", F.col("used_memory") / F.col("capacity"))
        .orderBy(F.col("role").asc(), F.col("server").asc())
        .collect()
    )
    out = []
    for r in rows:
        share = num(r["used_share"])
        out.append(
            {
                "server": r["server"], "role": r["role"], "primary": r["primary"],
                "used_memory": r["used_memory"], "used_memory_peak": r["used_memory_peak"],
                "maxmemory": r["maxmemory"], "capacity": r["capacity"], "used_share": share,
                "rss": r["used_memory_rss"], "fragmentation": num(r["fragmentation"]),
                "keys": r["keys"], "ops_per_sec": r["ops_per_sec"], "clients": r["clients"],
                "replication_lag_seconds": num(r["replication_lag_seconds"]),
                "aof_size": r["aof_size"], "slots": r["slots"],
                "over_headroom": share is not None and share > headroom,
                "fragmented": (num(r["fragmentation"]) or 0) > FRAGMENTED,
            }
        )  # fmt: skip
    return out


def per_snapshot(frame: DataFrame) -> DataFrame:
    """Per snapshot: the primaries' memory summed, their number, the largest one's used
    memory and capacity, and the total capacity."""
    primaries = frame.filter(F.col("role") == "primary").withColumn("capacity", _capacity())
    return primaries.groupBy("snapshot_date", "snapshot_time").agg(
        F.sum("used_memory").alias("used"),
        F.max("used_memory").alias("largest_used"),
        F.count("*").alias("primaries"),
        F.sum("capacity").alias("capacity"),
        F.max("capacity").alias("largest_capacity"),
    )


def daily_peaks(frame: DataFrame) -> DataFrame:
    """Per day, the highest total over its snapshots (`used_memory`) and the primaries'
    capacity then: what the forecast fits."""
    return (
        per_snapshot(frame)
        .groupBy("snapshot_date")
        .agg(F.max("used").alias("used_memory"), F.max("capacity").alias("capacity"))
        .orderBy("snapshot_date")
    )


def skew(servers_frame: DataFrame, mailboxes: DataFrame) -> dict[str, Any]:
    """Keys and mailbox bytes per primary (max / mean), and mailbox bytes per slot bucket."""
    srv = latest(servers_frame)
    primaries = srv.filter(F.col("role") == "primary")
    owner = srv.select(
        F.col("server").alias("read_server"),
        F.coalesce(F.col("primary"), F.col("server")).alias("owner"),
    )
    boxes = latest(mailboxes).join(owner, mailboxes["server"] == owner["read_server"], "left")
    boxes = boxes.withColumn("owner", F.coalesce(F.col("owner"), F.col("server")))
    # Each engine shard's slot bucket, as a literal array (no Python worker needed).
    buckets = F.array(*[F.lit(shard_slot(s) // (16384 // SLOT_BUCKETS)) for s in range(1024)])
    per_primary = {
        r["owner"]: r
        for r in boxes.groupBy("owner")
        .agg(F.sum("bytes").alias("bytes"), F.count("*").alias("mailboxes"))
        .collect()
    }
    rows = []
    for p in primaries.orderBy("server").collect():
        mine = per_primary.get(p["server"])
        rows.append(
            {"server": p["server"], "keys": whole(p["keys"]),
             "bytes": whole(mine["bytes"] if mine else 0),
             "mailboxes": whole(mine["mailboxes"] if mine else 0)}
        )  # fmt: skip
    applies = len(rows) > 1
    keys_ratio = _max_mean([r["keys"] for r in rows])
    bytes_ratio = _max_mean([r["bytes"] for r in rows])
    for r in rows:
        mean = sum(x["keys"] for x in rows) / len(rows) if rows else 0
        r["ratio"] = r["keys"] / mean if mean else None
    heat = (
        boxes.withColumn("bucket", F.element_at(buckets, F.col("shard") + 1))
        .groupBy("owner", "bucket")
        .agg(F.sum("bytes").alias("bytes"))
        .collect()
    )
    cells = {(r["owner"], r["bucket"]): whole(r["bytes"]) for r in heat}
    filled = [v for v in cells.values() if v > 0]
    mean_cell = sum(filled) / len(filled) if filled else 0
    names = [r["server"] for r in rows]
    # A bucket where a primary holds no mailbox is null: on a cluster that is a bucket of
    # slots another primary owns (1,024 shards leave about 16 to each bucket).
    values = [
        [
            cells[(n, b)] / mean_cell if (n, b) in cells and mean_cell else None
            for b in range(SLOT_BUCKETS)
        ]
        for n in names
    ]
    flagged = applies and max(keys_ratio or 0, bytes_ratio or 0) > SKEW_THRESHOLD
    return {
        "applies": applies, "threshold": SKEW_THRESHOLD, "keys_max_mean": keys_ratio,
        "bytes_max_mean": bytes_ratio, "flagged": flagged, "primaries": rows,
        "heatmap": {"rows": names, "columns": SLOT_BUCKETS, "values": values},
    }  # fmt: skip


def _max_mean(values: list[int]) -> float | None:
    if not values or sum(values) == 0:
        return None
    return max(values) / (sum(values) / len(values))
