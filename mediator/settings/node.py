"""The process's own section (a node's server, lease and shutdown) and the upkeep worker's."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import ClassVar

from mediator.settings.fields import setting


@dataclass(frozen=True)
class NodeSettings:
    """The process: its name and logs (a worker's too), and a node's server, lease and
    shutdown."""

    host: str = setting("127.0.0.1", "Address to listen on.", scope="serve")
    port: int = setting(8080, "TCP port to listen on.", scope="serve")
    id: str = setting(
        "", "This process's name in logs and in Redis. Empty: host-pid.", name="node_id"
    )
    log_level: str = setting("info", "debug, info, warning or error.")
    drain_seconds: float = setting(
        25.0,
        "On SIGTERM, how long the node takes to close its WebSockets (code 1012, a few at "
        "a time) and finish its requests before it exits; /readyz answers 503 meanwhile. "
        "Keep it under Kubernetes' terminationGracePeriodSeconds.",
        scope="serve",
    )
    storage_lost_seconds: float = setting(
        5.0,
        "How long Redis may leave this node's pings (one a second) unanswered before the "
        "node counts it lost: /readyz and storage requests answer 503 and its WebSockets "
        "are closed with 1013 so that wallets reconnect to a node that reaches Redis, "
        "until a ping is answered again.",
        scope="serve",
    )
    presence_seconds: float = setting(
        15.0,
        "A node's lease, which covers every live socket's hold on its recipient: renewed "
        "every third of it by one command; a dead node's recipients are free after it.",
        scope="serve",
    )
    route_cache_seconds: float = setting(
        5.0,
        "How long a node remembers which connection a recipient key routes to (0: ask "
        "Redis every time), on Redis Cluster, where a forward reads the route before it "
        "sends (elsewhere one script does both), and for recipient_key checks. Removals "
        "reach every node at once over pub/sub; this bounds staleness if one is lost.",
    )

    @property
    def resolved_id(self) -> str:
        """This process's name: --node-id, else host-pid."""
        return self.id or f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class WorkerSettings:
    """The upkeep worker: in a node or on its own, its partitions, pace and health file."""

    PREFIX: ClassVar[str] = "worker_"

    in_process: bool = setting(
        True,
        "Run the upkeep worker inside the node too (fine for one node; turn off when "
        "separate `mediator worker` processes run).",
        scope="serve",
        name="in_process_worker",
    )
    partitions: int = setting(
        16,
        "Number of upkeep partitions the workers lease (each covers 1,024 / N storage "
        "shards); the same on every process. More than the workers you run lets them "
        "share evenly.",
    )
    lease_seconds: float = setting(
        10.0,
        "How long a worker's partition lease lasts without renewal.",
        name="lease_seconds",
    )
    tick_seconds: float = setting(
        0.5,
        "How often a worker looks for due upkeep (one command when nothing is due).",
    )
    stats_seconds: float = setting(
        10.0,
        "How often a worker sums its partitions' totals for /metrics (one script call "
        "per storage shard): how fresh the queue gauges are.",
        name="stats_seconds",
    )
    hint_poll_seconds: float = setting(
        30.0,
        "How often a worker reads the head of each of its shards' schedules, in case a "
        "node died between a script and writing the shard's due hint.",
        name="hint_poll_seconds",
    )
    audit_queues_per_second: float = setting(
        1000.0,
        "Pace of the audit that repairs what a crash left in the queues' indexes, in "
        "queues checked per second by each worker (0: no audit).",
        name="audit_queues_per_second",
    )
    health_file: str = setting(
        "/tmp/mediator-worker.health",
        "File the worker touches on every healthy tick; read by --check.",
    )
    metrics_listen: str = setting(
        "",
        "HOST:PORT where a standalone worker serves its Prometheus /metrics (upkeeps, "
        "audit, push retries, leases held; empty: none). A node's in-process worker "
        "counts in the node's own /metrics.",
        scope="worker",
    )
