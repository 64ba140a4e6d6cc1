"""Prometheus metrics in base units, without per-queue labels.

Request counters are kept by this process. Queue totals come from the workers' partition
summaries (workers/totals.py), which sum the counters the scripts keep per shard: a scrape
costs one read per partition whatever the number of queues.
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
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from mediator.engine.books import EVENTS, read_summaries
from mediator.storage.clients import RedisClient

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
        self.queues = Gauge(
            "mediator_queues", "Queues, by namespace (mqs, didcomm).", ["namespace"], registry=r
        )
        self.messages = Gauge(
            "mediator_queue_messages",
            "Messages in all queues, by namespace and state (visible, in_flight, delayed).",
            ["namespace", "state"],
            registry=r,
        )
        self.bytes = Gauge(
            "mediator_queue_bytes", "Body bytes held in all queues.", ["namespace"], registry=r
        )
        self.oldest = Gauge(
            "mediator_queue_oldest_message_age_seconds",
            "Age of the oldest stored message of any queue (0 when none is stored).",
            ["namespace"],
            registry=r,
        )
        self.stats_age = Gauge(
            "mediator_queue_stats_age_seconds",
            "Age of the stalest partition summary behind the queue figures (workers refresh "
            "them every MEDIATOR_STATS_SECONDS).",
            registry=r,
        )
        self.summaries_missing = Gauge(
            "mediator_queue_stats_partitions_missing",
            "Worker partitions without a summary yet (their queues are not in the figures).",
            registry=r,
        )
        self.events = _EventsCollector()
        r.register(self.events)
        self.upkeeps = Counter(
            "mediator_worker_upkeeps",
            "Schedule entries (queue upkeep, push retries, forwarding expiry) this process's "
            "worker ran.",
            registry=r,
        )
        self.audited = Counter(
            "mediator_worker_audited_queues",
            "Queues this process's worker checked in its audit.",
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

    async def refresh_queue_totals(self, redis: RedisClient, partitions: int) -> None:
        totals, stalest, missing = await read_summaries(redis, partitions)
        now_ms = int(time.time() * 1000)
        for ns, t in totals.items():
            self.queues.labels(ns).set(t.values["q"])
            self.messages.labels(ns, "visible").set(t.visible)
            self.messages.labels(ns, "in_flight").set(t.values["fl"])
            self.messages.labels(ns, "delayed").set(t.values["d"])
            self.bytes.labels(ns).set(t.values["b"])
            age = 0 if t.oldest_ms is None else max(0, now_ms - t.oldest_ms) / 1000
            self.oldest.labels(ns).set(age)
        self.events.values = {
            (ns, event): t.values[field]
            for ns, t in totals.items()
            for field, event in EVENTS.items()
        }
        self.stats_age.set(0 if stalest is None else max(0, now_ms - stalest) / 1000)
        self.summaries_missing.set(missing)

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _EventsCollector(Collector):
    """Cumulative message counts of all queues, as the partition summaries last said."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], int] = {}

    def collect(self) -> Any:
        family = CounterMetricFamily(
            "mediator_queue_message_events",
            "Messages of all queues since they were created, by namespace and event (added, "
            "delivered: handed out, re-offers included; acknowledged: deleted by id; expired; "
            "dead_lettered; dropped with a deleted queue).",
            labels=["namespace", "event"],
        )
        for (ns, event), value in sorted(self.values.items()):
            family.add_metric([ns, event], value)
        yield family
