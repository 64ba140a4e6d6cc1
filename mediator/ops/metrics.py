"""Prometheus metrics in base units, without per-queue labels.

Request counters are kept by this process. Queue totals come from the workers' partition
summaries (workers/runner.py), which sum the counters the scripts keep per shard: a scrape
costs one read per partition whatever the number of queues. The deployment's figures (Redis
memory, workers and their leases) are read at scrape time (mediator/ops/cluster_state.py).

A standalone worker serves only its own counters (`Metrics(worker=True)`): upkeeps, audit,
push retries and the leases it holds.
"""

from __future__ import annotations

import time
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from mediator.engine.books import EVENTS, read_summaries
from mediator.errors import ConfigError
from mediator.ops.cluster_state import ClusterState
from mediator.storage.clients import RedisClient

disable_created_metrics()  # type: ignore[no-untyped-call]

# The abuse limits (docs/security.md), as `mediator_limit_refusals_total` names them: the
# HTTP and DIDComm ones (RateLimited.limit), then the WebSocket's own.
LIMITS = (
    "handshakes",
    "connections",
    "forwards_per_second",
    "sender_bytes_per_minute",
    "sender_queued_bytes",
    "websocket_messages",
    "websocket_sockets",
    "websocket_first_message",
)


class Metrics:
    def __init__(self, *, worker: bool = False) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, resident memory
        # A worker's registry holds only what a worker counts; the node's figures are made
        # for it all the same (unregistered), so that the code that sets them runs anywhere.
        shared = self.registry
        r = None if worker else self.registry
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
            "mediator_queues",
            "Queues, by queue namespace (mqs, didcomm).",
            ["queue_namespace"],
            registry=r,
        )
        self.messages = Gauge(
            "mediator_queue_messages",
            "Messages in all queues, by queue namespace and state (visible, in_flight, delayed).",
            ["queue_namespace", "state"],
            registry=r,
        )
        self.bytes = Gauge(
            "mediator_queue_bytes",
            "Body bytes held in all queues.",
            ["queue_namespace"],
            registry=r,
        )
        self.oldest = Gauge(
            "mediator_queue_oldest_message_age_seconds",
            "Age of the oldest stored message of any queue (0 when none is stored).",
            ["queue_namespace"],
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
        if r is not None:
            r.register(self.events)
        self.upkeeps = Counter(
            "mediator_worker_upkeeps",
            "Schedule entries (queue upkeep, push retries, forwarding expiry) this process's "
            "worker ran.",
            registry=shared,
        )
        self.audited = Counter(
            "mediator_worker_audited_queues",
            "Queues this process's worker checked in its audit.",
            registry=shared,
        )
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}
        self.waiters = Gauge(
            "mediator_long_poll_waiters", "Long-poll requests waiting on this node.", registry=r
        )
        self.didcomm_messages = Counter(
            "mediator_didcomm_messages",
            "DIDComm messages received, by protocol message (family/major/name, or 'other'), "
            "outcome (ok, problem_report, refused) and DIDComm version (v1, v2).",
            ["type", "outcome", "didcomm"],
            registry=r,
        )
        self.delivered = Counter(
            "mediator_didcomm_handed_out_messages",
            "Queued messages handed out to recipients (deliveries, batches, live, implicit; "
            "re-offers included).",
            registry=r,
        )
        self.duplicates = Counter(
            "mediator_didcomm_duplicate_forwards",
            "Forwarded envelopes not stored again because the connection already held the "
            "same bytes unacknowledged (a sender forwarding one envelope per recipient key).",
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
            "endpoint answered 2xx; failed: kept queued and retried with backoff; refused: "
            "the endpoint's address is not allowed (--outbound-allow), kept for pickup).",
            ["outcome"],
            registry=shared,
        )
        self.notifications = Counter(
            "mediator_notifications",
            "Phone notifications, by provider (fcm, apns, webhook; none when nothing was sent) "
            "and outcome: scheduled (a node queued a forward for a connection with a device), "
            "sent, gone (token unregistered or invalid: device info removed), retried (429, "
            "5xx, unreachable), failed (refused or out of attempts), or why none was sent: "
            "live, empty, interval (waits for the interval's end), nothing_new, no_device, "
            "no_provider.",
            ["provider", "outcome"],
            registry=shared,
        )
        self.confirmations = Counter(
            "mediator_send_confirmations",
            "Sends that waited for replicas or fsyncs (--wait-replicas, --wait-fsync), by "
            "outcome: confirmed, shortfall (answered 503) or error.",
            ["outcome"],
            registry=r,
        )
        self.calls_in_flight = Histogram(
            "mediator_redis_calls_in_flight",
            "Per hot-path script call (forwards, sends, receives, deletes), the calls in "
            "flight on the node's pipelined connection to its Redis server as it went, itself "
            "included: 1 when alone; higher when Redis is busy or far.",
            registry=r,
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
        )
        self.websockets = Gauge(
            "mediator_websockets", "DIDComm WebSockets open on this node.", registry=r
        )
        self.leases = Gauge(
            "mediator_worker_leases",
            "Upkeep partitions this process's worker holds a lease on.",
            registry=shared,
        )
        self.ready = Gauge(
            "mediator_ready",
            "1 while this node answers /readyz with 200 (not draining, Redis answers), else 0.",
            registry=r,
        )
        self.limited = Counter(
            "mediator_limit_refusals",
            "Refusals by an abuse limit, by limit: handshakes, connections (per client "
            "address a minute), forwards_per_second (per recipient), sender_bytes_per_minute, "
            "sender_queued_bytes (per sender): a request answered 429 or a rate-limited "
            "frame; websocket_messages: a frame refused or dropped, or its socket closed, for "
            "the socket's rate; websocket_sockets: a socket closed, too many from its "
            "address; websocket_first_message: a socket closed with no valid message in time.",
            ["limit"],
            registry=r,
        )
        for limit in LIMITS:  # every limit's series from the start, at 0
            self.limited.labels(limit)
        self.senders_refused = Gauge(
            "mediator_senders_over_queued_bytes",
            "Senders refused forwards now for having more than --limit-sender-queued-bytes "
            "queued (across the cluster), read at scrape time.",
            registry=r,
        )
        self.redis_used = Gauge(
            "mediator_redis_used_memory_bytes",
            "Memory each Redis primary uses (INFO used_memory), read at scrape time.",
            ["server"],
            registry=r,
        )
        self.redis_max = Gauge(
            "mediator_redis_maxmemory_bytes",
            "Each Redis primary's maxmemory (0: no limit), read at scrape time.",
            ["server"],
            registry=r,
        )
        self.partitions = Gauge(
            "mediator_worker_partitions",
            "Upkeep partitions configured (MEDIATOR_WORKER_PARTITIONS).",
            registry=r,
        )
        self.partitions_leased = Gauge(
            "mediator_worker_partitions_leased",
            "Upkeep partitions a live worker holds a lease on, in the whole deployment; the "
            "others get no upkeep until a worker takes them.",
            registry=r,
        )
        self.workers = Gauge(
            "mediator_workers",
            "Live workers in the whole deployment (in-process ones included).",
            registry=r,
        )
        self._servers: set[str] = set()

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

    def refused_by(self, limit: str) -> None:
        """An abuse limit (one of LIMITS) refused a request, a frame or a socket."""
        self.limited.labels(limit).inc()

    async def refresh_queue_totals(self, redis: RedisClient, partitions: int) -> None:
        totals, stalest, missing = await read_summaries(redis, partitions)
        now_ms = int(time.time() * 1000)
        for ns, t in totals.items():
            self.queues.labels(ns).set(t.queues)
            self.messages.labels(ns, "visible").set(t.visible)
            self.messages.labels(ns, "in_flight").set(t.in_flight)
            self.messages.labels(ns, "delayed").set(t.delayed)
            self.bytes.labels(ns).set(t.stored_bytes)
            age = 0 if t.oldest_ms is None else max(0, now_ms - t.oldest_ms) / 1000
            self.oldest.labels(ns).set(age)
        self.events.values = {
            (ns, event): t.values[field]
            for ns, t in totals.items()
            for field, event in EVENTS.items()
        }
        self.stats_age.set(0 if stalest is None else max(0, now_ms - stalest) / 1000)
        self.summaries_missing.set(missing)

    def set_cluster_state(self, state: ClusterState, partitions: int) -> None:
        self.partitions.set(partitions)
        self.partitions_leased.set(state.partitions_leased)
        self.workers.set(state.workers)
        self.senders_refused.set(state.senders_refused)
        seen = {m.server for m in state.memory}
        for gone in self._servers - seen:  # a primary replaced after a failover
            self.redis_used.remove(gone)
            self.redis_max.remove(gone)
        self._servers = seen
        for m in state.memory:
            self.redis_used.labels(m.server).set(m.used_bytes)
            self.redis_max.labels(m.server).set(m.max_bytes)

    def render(self) -> bytes:
        return generate_latest(self.registry)

    def serve(self, listen: str) -> WSGIServer:
        """Serve /metrics on HOST:PORT from a thread (a standalone worker's endpoint)."""
        host, sep, port = listen.rpartition(":")
        if not sep or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"--worker-metrics-listen wants HOST:PORT, not {listen!r}")
        try:
            server, _ = start_http_server(int(port), host.strip("[]") or "0.0.0.0", self.registry)
        except OSError as exc:
            raise ConfigError(f"cannot serve metrics on {listen}: {exc}") from exc
        return server


class _EventsCollector(Collector):
    """Cumulative message counts of all queues, as the partition summaries last said."""

    def __init__(self) -> None:
        self.values: dict[tuple[str, str], int] = {}

    def collect(self) -> Any:
        family = CounterMetricFamily(
            "mediator_queue_message_events",
            "Messages of all queues since they were created, by queue namespace and event (added, "
            "delivered: handed out, re-offers included; acknowledged: deleted by id; expired; "
            "dead_lettered; dropped with a deleted queue).",
            labels=["queue_namespace", "event"],
        )
        for (ns, event), value in sorted(self.values.items()):
            family.add_metric([ns, event], value)
        yield family
