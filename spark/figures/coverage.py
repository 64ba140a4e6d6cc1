"""What the newest snapshot read: mailboxes against the books, how memory was measured,
the replicas' lag, and what reading cost."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark.figures.common import latest, num, whole


def coverage(mailboxes: DataFrame, cluster: DataFrame) -> dict[str, Any]:
    books = latest(cluster)
    row = books.agg(
        F.sum("rows").alias("rows"), F.sum("queues").alias("queues"),
        F.first("read_from").alias("read_from"), F.first("memory_sample_rate").alias("rate"),
        F.max("replica_lag_seconds").alias("lag_s"), F.max("replica_lag_bytes").alias("lag_b"),
        F.first("commands").alias("commands"), F.first("duration_seconds").alias("seconds"),
        F.max("snapshot_time").alias("time"),
    ).first()  # fmt: skip
    sampled = (
        latest(mailboxes)
        .filter(F.col("memory_sampled"))
        .agg(F.count("*").alias("n"), F.avg("memory_bytes").alias("mean"))
        .first()
    )
    if row is None or row["time"] is None:
        return {}
    read, known = whole(row["rows"]), whole(row["queues"])
    rate = num(row["rate"]) or 0.0
    mean = num(sampled["mean"]) if sampled else None
    return {
        "snapshot_time": row["time"].strftime("%Y-%m-%dT%H:%M:%SZ"),
        "read_from": row["read_from"],
        "mailboxes_read": read, "mailboxes_in_books": known,
        "share_read": read / known if known else None,
        "memory": "exact" if rate >= 1 else "sampled",
        "memory_sample_rate": rate,
        "memory_sampled_mailboxes": whole(sampled["n"] if sampled else 0),
        "estimated_mailbox_memory": None if mean is None else mean * read,
        "replica_lag_seconds": num(row["lag_s"]), "replica_lag_bytes": row["lag_b"],
        "commands": whole(row["commands"]), "duration_seconds": num(row["seconds"]),
    }  # fmt: skip
