"""Prometheus metrics in base units, without per-queue labels.

Request counters are kept by this process. Queue totals come from the per-shard sums that
the workers write while they walk their shards, so a scrape costs a few reads whatever the
number of queues.
"""

from __future__ import annotations

import time
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from mediator.engine import keys
from mediator.storage.clients import RedisClient

NAMESPACES = ("mqs", "didcomm")

disable_created_metrics()  # type: ignore[no-untyped-call]


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "mediator_http_requests",
            "HTTP requests answered, by route template, method and status.",
            ["route", "method", "status"],
            registry=r,
        )
        self.duration = Histogram(
            "mediator_http_request_duration_seconds",
            "Time to answer an HTTP request (long polls included).",
            ["route", "method"],
            registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5, 30, 65),
        )
        self.queues = Gauge("mediator_queues", "Queues, by namespace.", ["namespace"], registry=r)
        self.messages = Gauge(
            "mediator_queue_messages",
            "Messages in all queues, by state (visible, in_flight, delayed).",
            ["state"],
            registry=r,
        )
        self.bytes = Gauge("mediator_queue_bytes", "Body bytes held in all queues.", registry=r)
        self.oldest = Gauge(
            "mediator_queue_oldest_message_age_seconds",
            "Age of the oldest message in any queue.",
            registry=r,
        )
        self.stats_age = Gauge(
            "mediator_queue_stats_age_seconds",
            "Age of the oldest per-shard total behind the queue gauges (workers refresh them).",
            registry=r,
        )
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self.waiters = Gauge(
            "mediator_long_poll_waiters", "Long-poll requests waiting on this node.", registry=r
        )
        self.didcomm_messages = Counter(
            "mediator_didcomm_messages",
            "DIDComm messages received, by protocol message (family/major/name, or 'other') "
            "and outcome (ok, problem_report, refused).",
            ["type", "outcome"],
            registry=r,
        )
        self.delivered = Counter(
            "mediator_didcomm_handed_out_messages",
            "Queued messages handed out to recipients (deliveries, batches, live, implicit; "
            "re-offers included).",
            registry=r,
        )
        self.acknowledged = Counter(
            "mediator_didcomm_removed_messages",
            "Queued messages removed because recipients acknowledged or received them.",
            registry=r,
        )
        self.pushes = Counter(
            "mediator_didcomm_pushes",
            "Queued messages pushed to recipients' own endpoints, by outcome (delivered: the "
            "endpoint answered 2xx; failed: kept queued and retried with backoff).",
            ["outcome"],
            registry=r,
        )
        self.confirmations = Counter(
            "mediator_send_confirmations",
            "Sends that waited for replicas or fsyncs (--wait-replicas, --wait-fsync), by "
            "outcome: confirmed, shortfall (answered 503) or error.",
            ["outcome"],
            registry=r,
        )
        self.websockets = Gauge(
            "mediator_websockets", "DIDComm WebSockets open on this node.", registry=r
        )

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        """Counts a request; label children are looked up once per label set."""
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = (
                self.requests.labels(route, method, str(status)),
                self.duration.labels(route, method),
            )
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    async def refresh_queue_totals(self, redis: RedisClient, shards: int) -> None:
        pipe = redis.pipeline(transaction=False)
        for ns in NAMESPACES:
            pipe.zcard(keys.registry(ns))
        for shard in range(shards):
            pipe.hgetall(keys.shard_stats(shard))
        rows = await pipe.execute()
        for ns, count in zip(NAMESPACES, rows, strict=False):
            self.queues.labels(ns).set(int(count))
        totals = {"visible": 0, "in_flight": 0, "delayed": 0, "bytes": 0}
        oldest: int | None = None
        stalest: int | None = None
        now_ms = int(time.time() * 1000)
        for raw in rows[len(NAMESPACES) :]:
            fields = {k.decode(): int(v) for k, v in raw.items()}
            if not fields:
                continue
            for key in totals:
                totals[key] += fields.get(key, 0)
            if fields.get("oldest_ms", -1) >= 0 and (
                oldest is None or fields["oldest_ms"] < oldest
            ):
                oldest = fields["oldest_ms"]
            if stalest is None or fields["updated_ms"] < stalest:
                stalest = fields["updated_ms"]
        for state in ("visible", "in_flight", "delayed"):
            self.messages.labels(state).set(totals[state])
        self.bytes.set(totals["bytes"])
        self.oldest.set(0 if oldest is None else max(0, now_ms - oldest) / 1000)
        self.stats_age.set(0 if stalest is None else max(0, now_ms - stalest) / 1000)

    def render(self) -> bytes:
        return generate_latest(self.registry)
