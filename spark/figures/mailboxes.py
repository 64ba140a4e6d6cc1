"""Mailbox figures of the newest snapshot (and, for ages and dead letters, of each day):
how many (DIDComm, of them DIDComm v2 wallets', and mqs), sizes and their spread,
oldest-message ages, staleness, in-flight redeliveries, dead letter queues, and live
sockets with a backlog."""

from __future__ import annotations

import math
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from mediator.mediation.record import DIDCOMM_V2
from spark.figures.common import DAY_MS, UNLIMITED_RETENTION, capped, daily, latest, num, whole

AGE_BUCKETS = ["empty", "< 1 h", "1-6 h", "6-24 h", "1-7 d", "7-30 d", "> 30 d"]
_HOUR = 3_600_000
AGE_EDGES = [_HOUR, 6 * _HOUR, 24 * _HOUR, 7 * DAY_MS, 30 * DAY_MS]  # ms, upper bounds
STALE_DAYS = (7, 30, 90)
REDELIVERED = 3  # an in-flight message handed out this often points at a broken wallet
CCDF_STEPS = [1, 2, 5]
LORENZ_POINTS = 100


def _held() -> Column:
    return F.col("stored") + F.col("delayed")


def sizes(frame: DataFrame, top: int) -> dict[str, Any]:
    now = latest(frame).withColumn("held", _held()).cache()
    totals = now.agg(
        F.count("*").alias("count"),
        F.sum(F.when(F.col("namespace") == "didcomm", 1).otherwise(0)).alias("didcomm"),
        F.sum(F.when(F.col("namespace") == "mqs", 1).otherwise(0)).alias("mqs"),
        F.sum(F.when(F.col("handshake_protocol") == DIDCOMM_V2, 1).otherwise(0)).alias("v2"),
        F.sum("held").alias("messages"),
        F.sum("bytes").alias("bytes"),
        F.percentile("held", F.array(*[F.lit(p) for p in (0.5, 0.95, 0.99)])).alias("mp"),
        F.percentile("bytes", F.array(*[F.lit(p) for p in (0.5, 0.95, 0.99)])).alias("bp"),
        F.max("held").alias("mmax"),
        F.max("bytes").alias("bmax"),
    ).first()
    assert totals is not None
    count = whole(totals["count"])
    out: dict[str, Any] = {
        "count": count, "didcomm": whole(totals["didcomm"]), "mqs": whole(totals["mqs"]),
        "didcomm_v2": whole(totals["v2"]),
        "messages": _spread(totals["messages"], totals["mp"], totals["mmax"]),
        "bytes": _spread(totals["bytes"], totals["bp"], totals["bmax"]),
    }  # fmt: skip
    out["ccdf"] = _ccdf(now, count, whole(totals["mmax"]))
    out.update(_lorenz(now, count, whole(totals["bytes"])))
    heavy = now.orderBy(F.col("bytes").desc(), F.col("mailbox").asc()).limit(top + 1000).collect()
    rows = [
        {"mailbox": r["mailbox"] if r["name"] is None else r["name"],
         "namespace": r["namespace"], "messages": whole(r["held"]), "bytes": whole(r["bytes"]),
         "oldest_age_seconds": _age(r["read_ms"], r["oldest_ms"]), "live": bool(r["live"])}
        for r in heavy if whole(r["bytes"]) > 0
    ]  # fmt: skip
    out["heaviest"] = _heaviest(rows, top, now, whole(totals["bytes"]), whole(totals["messages"]))
    now.unpersist()
    return out


def _heaviest(
    rows: list[dict[str, Any]], top: int, now: DataFrame, total_bytes: int, total_messages: int
) -> list[dict[str, Any]]:
    """The top mailboxes by bytes, and one `other` row for every other mailbox holding any."""
    shown = rows[:top]
    if len(rows) <= top:
        return shown
    held = now.filter(F.col("bytes") > 0).count()
    other = {
        "other": True, "count": held - len(shown),
        "bytes": total_bytes - sum(r["bytes"] for r in shown),
        "messages": total_messages - sum(r["messages"] for r in shown),
    }  # fmt: skip
    return [*shown, other]


def _spread(total: Any, pcts: Any, most: Any) -> dict[str, Any]:
    p = list(pcts) if pcts is not None else [None, None, None]
    return {"total": whole(total), "p50": num(p[0]), "p95": num(p[1]), "p99": num(p[2]),
            "max": whole(most)}  # fmt: skip


def _ccdf(now: DataFrame, count: int, most: int) -> list[dict[str, Any]]:
    """Share of mailboxes holding at least 1, 2, 5, 10, 20, 50, ... messages."""
    if count == 0 or most == 0:
        return []
    thresholds = []
    scale = 1
    while scale <= most:
        thresholds += [scale * s for s in CCDF_STEPS if scale * s <= most]
        scale *= 10
    at_least = now.agg(
        *[F.sum(F.when(F.col("held") >= t, 1).otherwise(0)).alias(f"t{t}") for t in thresholds]
    ).first()
    assert at_least is not None
    return [{"messages": t, "share": whole(at_least[f"t{t}"]) / count} for t in thresholds]


def _lorenz(now: DataFrame, count: int, total: int) -> dict[str, Any]:
    """Mailboxes ordered by bytes, smallest first: the cumulative share of bytes at each
    share of mailboxes, the Gini coefficient, and the top 1 %'s share."""
    if count == 0 or total == 0:
        return {"lorenz": [], "gini": None, "top1_bytes_share": None}
    rank = now.select("bytes").withColumn(
        "i", F.row_number().over(Window.orderBy(F.col("bytes").asc()))
    )
    weighted = rank.agg(F.sum(F.col("i") * F.col("bytes")).alias("w")).first()
    assert weighted is not None
    gini = 2 * float(weighted["w"]) / (count * total) - (count + 1) / count
    top_n = math.ceil(count / 100)
    top = rank.filter(F.col("i") > count - top_n).agg(F.sum("bytes")).first()
    marks = sorted({max(1, round(count * k / LORENZ_POINTS)) for k in range(1, LORENZ_POINTS + 1)})
    cum = (
        rank.withColumn(
            "cum",
            F.sum("bytes").over(Window.orderBy("i").rowsBetween(Window.unboundedPreceding, 0)),
        )
        .filter(F.col("i").isin(marks))
        .orderBy("i")
        .collect()
    )
    curve = [{"mailboxes": 0.0, "bytes": 0.0}]
    curve += [{"mailboxes": r["i"] / count, "bytes": whole(r["cum"]) / total} for r in cum]
    return {
        "lorenz": curve,
        "gini": gini,
        "top1_bytes_share": whole(top[0] if top else 0) / total,
    }


def _age(read_ms: Any, oldest_ms: Any) -> float | None:
    if read_ms is None or oldest_ms is None:
        return None
    return max(0.0, (int(read_ms) - int(oldest_ms)) / 1000)


def _bucket() -> Any:
    age = F.col("read_ms") - F.col("oldest_ms")
    expr = F.when(F.col("oldest_ms").isNull(), 0)
    for i, edge in enumerate(AGE_EDGES):
        expr = expr.when(age < edge, i + 1)
    return expr.otherwise(len(AGE_EDGES) + 1)


def ages(frame: DataFrame) -> dict[str, Any]:
    counts = (
        daily(frame)
        .withColumn("bucket", _bucket())
        .groupBy("snapshot_date", "bucket")
        .count()
        .collect()
    )
    by_day: dict[str, list[int]] = {}
    for r in counts:
        by_day.setdefault(r["snapshot_date"], [0] * len(AGE_BUCKETS))[r["bucket"]] = r["count"]
    past = (
        latest(frame)
        .filter(F.col("oldest_ms").isNotNull() & (F.col("retention_seconds") < UNLIMITED_RETENTION))
        .filter(F.col("read_ms") - F.col("oldest_ms") > F.col("retention_seconds") * 1000)
        .count()
    )
    days = [{"date": d, "counts": by_day[d]} for d in sorted(by_day)]
    return {"buckets": AGE_BUCKETS, "days": days, "past_horizon": past}


def staleness(frame: DataFrame) -> list[dict[str, Any]]:
    """Mailboxes holding messages that nobody picked up for N days (never: since created)."""
    idle = F.col("read_ms") - F.coalesce(F.col("last_delivered_ms"), F.col("created_ms"))
    held = latest(frame).filter(_held() > 0).withColumn("idle", idle)
    row = held.agg(
        *[
            F.sum(F.when(F.col("idle") >= d * DAY_MS, 1).otherwise(0)).alias(f"n{d}")
            for d in STALE_DAYS
        ],
        *[
            F.sum(F.when(F.col("idle") >= d * DAY_MS, F.col("bytes")).otherwise(0)).alias(f"b{d}")
            for d in STALE_DAYS
        ],
    ).first()
    return [
        {
            "days": d,
            "mailboxes": whole(row[f"n{d}"] if row else 0),
            "bytes": whole(row[f"b{d}"] if row else 0),
        }
        for d in STALE_DAYS
    ]


def inflight(frame: DataFrame) -> dict[str, Any]:
    now = latest(frame)
    sums = now.agg(
        F.sum("in_flight").alias("messages"),
        F.sum(F.when(F.col("in_flight") > 0, 1).otherwise(0)).alias("mailboxes"),
        F.sum(
            F.when(F.exists("inflight_delivery_counts", lambda c: c >= REDELIVERED), 1).otherwise(0)
        ).alias("redelivered"),
    ).first()
    hist = (
        now.select(F.explode("inflight_delivery_counts").alias("deliveries"))
        .groupBy("deliveries")
        .count()
        .orderBy("deliveries")
        .collect()
    )
    histogram = [{"deliveries": r["deliveries"], "messages": r["count"]} for r in hist]
    return {
        "messages": whole(sums["messages"] if sums else 0),
        "mailboxes": whole(sums["mailboxes"] if sums else 0),
        "histogram": histogram,
        "max_deliveries": max((h["deliveries"] for h in histogram), default=None),
        "redelivered_mailboxes": whole(sums["redelivered"] if sums else 0),
    }


def dead_letters(frame: DataFrame, top: int) -> list[dict[str, Any]]:
    """mqs queues that are some queue's dead letter queue: now, and their daily trend."""
    dlq = frame.filter((F.col("namespace") == "mqs") & (F.col("dead_letter_sources") > 0))
    first = dlq.agg(F.min("snapshot_time")).first()
    if first is None or first[0] is None:
        return []
    days = F.datediff(F.to_date("snapshot_date"), F.to_date(F.lit(str(first[0])[:10])))
    trend = {
        r["name"]: num(r["slope"])
        for r in daily(dlq)
        .withColumn("x", days.cast("double"))
        .groupBy("name")
        .agg(F.regr_slope(_held().cast("double"), F.col("x")).alias("slope"))
        .collect()
    }
    rows = latest(dlq).orderBy(F.col("stored").desc(), F.col("name")).collect()
    out = [
        {"queue": r["name"], "messages": whole(r["stored"]) + whole(r["delayed"]),
         "bytes": whole(r["bytes"]), "oldest_age_seconds": _age(r["read_ms"], r["oldest_ms"]),
         "sources": whole(r["dead_letter_sources"]), "growth_per_day": trend.get(r["name"])}
        for r in rows
    ]  # fmt: skip
    return capped(out, top, ("messages", "bytes"))


def live(frame: DataFrame, top: int) -> dict[str, Any]:
    """Mailboxes a live socket holds, and those of them with messages waiting visible: a
    live socket should have been handed them at once."""
    sockets = latest(frame).filter(F.col("live"))
    backlog = F.col("visible") > 0
    sums = sockets.agg(
        F.count("*").alias("sockets"),
        F.sum(F.when(backlog, 1).otherwise(0)).alias("with_backlog"),
        F.sum(F.when(backlog, F.col("visible")).otherwise(0)).alias("backlog"),
    ).first()
    nodes = (
        sockets.groupBy("live_node")
        .agg(
            F.count("*").alias("sockets"),
            F.sum(F.when(backlog, 1).otherwise(0)).alias("with_backlog"),
        )
        .orderBy(F.col("sockets").desc(), F.col("live_node"))
        .collect()
    )
    worst = (
        sockets.filter(backlog)
        .orderBy(F.col("visible").desc(), F.col("mailbox"))
        .limit(top + 1)
        .collect()
    )
    by_node = [
        {"node": r["live_node"], "sockets": r["sockets"], "with_backlog": whole(r["with_backlog"])}
        for r in nodes
    ]
    return {
        "sockets": whole(sums["sockets"] if sums else 0),
        "with_backlog": whole(sums["with_backlog"] if sums else 0),
        "backlog_messages": whole(sums["backlog"] if sums else 0),
        "by_node": capped(by_node, top, ("sockets", "with_backlog")),
        "worst": [
            {
                "mailbox": r["mailbox"],
                "node": r["live_node"],
                "messages": whole(r["visible"]),
                "oldest_age_seconds": _age(r["read_ms"], r["oldest_ms"]),
            }
            for r in worst[:top]
        ],
    }
