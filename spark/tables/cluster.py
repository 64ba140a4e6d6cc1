"""The `cluster` table: one row per namespace per snapshot: the nodes, workers and leases
alive, the books' totals summed over every shard (the cumulative counters among them), and
how the snapshot itself went (what it read, sampled, sent; the replicas' lag)."""

from __future__ import annotations

from typing import Any

from mediator.engine import keys
from mediator.engine.books import COUNTERS
from mediator.engine.layout import VERSION_FIELD
from mediator.engine.leases import Lease
from spark.source.pacing import Pacer
from spark.source.topology import Topology
from spark.source.wire import Wire, checked
from spark.tables.columns import Column, Table

C = Column
CLUSTER = Table(
    "cluster",
    (
        C("namespace", "string", "didcomm or mqs"),
        C("mode", "string", "standalone, sentinel or cluster"),
        C("layout_version", "int", "the engine's key layout"),
        C("nodes_alive", "int", "mediator nodes whose lease runs"),
        C("workers_alive", "int", "workers whose heartbeat runs"),
        C("partitions", "int", "worker partitions with a lease entry"),
        C("leases_live", "int", "of them, leases not expired"),
        C("queues", "long", "queues the books count"),
        C("stored", "long", "messages stored (visible and in flight)"),
        C("delayed", "long", "messages not yet due"),
        C("bytes", "long", "body bytes held"),
        C("added", "long", "cumulative: messages added"),
        C("delivered", "long", "cumulative: messages handed out"),
        C("acknowledged", "long", "cumulative: messages removed by their recipient"),
        C("expired", "long", "cumulative: messages dropped at their duration limit"),
        C("dead_lettered", "long", "cumulative: messages moved to a dead letter queue"),
        C("dropped", "long", "cumulative: messages dropped with their queue"),
        C("rows", "long", "mailbox rows the snapshot wrote (this namespace)"),
        C("read_from", "string", "primary or replica"),
        C("memory_sample_rate", "double", "share of mailboxes whose MEMORY USAGE was read"),
        C("replica_lag_seconds", "double", "the largest lag of a replica read"),
        C("replica_lag_bytes", "long", "the largest lag of a replica read, in bytes"),
        C("commands", "long", "commands the snapshot sent"),
        C("peak_partition_rate", "long", "the most commands a partition sent in a second"),
        C("duration_seconds", "double", "how long the snapshot took"),
        C("hash_key_id", "string", "fingerprint of the pseudonym key (pseudonyms.key_id)"),
    ),
)


def control_rows(topology: Topology, now_ms: int) -> dict[str, Any]:
    """Nodes, workers, leases and layout: the few keys outside the shards."""
    client = topology.control()
    try:
        nodes = client.zcount(keys.nodes(), now_ms, "+inf")
        workers = client.zcount(keys.workers(), now_ms, "+inf")
        leases = client.hgetall(keys.leases())
        layout = client.hget(keys.layout(), VERSION_FIELD)
    finally:
        client.close()
    live = sum(1 for v in leases.values() if Lease.parse(v).live(now_ms))
    return {
        "nodes_alive": int(nodes),
        "workers_alive": int(workers),
        "partitions": len(leases),
        "leases_live": live,
        "layout_version": int(layout) if layout else None,
    }


def book_totals(topology: Topology, rate: float) -> tuple[dict[str, dict[str, int]], int]:
    """The books' totals per namespace, summed over every shard, read where the mailboxes
    are read (so a replica read leaves the primaries alone); and the commands that took."""
    totals = {ns: dict.fromkeys(COUNTERS.values(), 0) for ns in keys.NAMESPACES}
    sent = 0
    for primary, source in topology.reading():
        readonly = source is not primary and topology.mode.value == "cluster"
        wire = Wire(topology.auth.connect(source.endpoint), Pacer(rate), readonly=readonly)
        read = [(s, ns) for s in primary.shards for ns in keys.NAMESPACES]
        try:
            replies = wire.run([("HMGET", keys.shard_totals(s, ns), *COUNTERS) for s, ns in read])
            sent += wire.pacer.sent
        finally:
            wire.close()
        for (_, ns), reply in zip(read, replies, strict=True):
            for name, value in zip(COUNTERS.values(), checked(reply), strict=True):
                totals[ns][name] += int(value or 0)
    return totals, sent
