"""The snapshot job: one snapshot of the engine's Redis into the history's three tables.

    mediator capacity snapshot --redis-url URL --out HISTORY_DIR
    spark-submit spark/snapshot.py --redis-url URL --out HISTORY_DIR

Each table is Parquet under HISTORY_DIR/<table>/, partitioned by `snapshot_date` and
`snapshot_id` (the snapshot's UTC time, `YYYYMMDDTHHMMSSZ`): several snapshots a day live
side by side, and a rerun with the same `--snapshot-time` replaces its own partition only
(dynamic partition overwrite). The servers' INFO is read before the mailboxes, the cluster
table written last: a snapshot whose cluster rows are missing did not finish.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mediator.engine import keys
from mediator.errors import ConfigError
from mediator.mediation.limits import QueueLimits
from mediator.settings import Settings
from mediator.storage.target import parse
from spark import progress, pseudonyms
from spark.source.reader import ReadPlan
from spark.source.redis_source import ShardPartition, plan_partitions, source_for
from spark.source.topology import Topology, discover
from spark.tables.cluster import CLUSTER, book_totals, control_rows
from spark.tables.columns import PARTITION_COLUMN, SCHEMA_VERSION, Table
from spark.tables.mailboxes import MAILBOXES
from spark.tables.servers import SERVERS, server_rows

JOB = "snapshot"
TABLES = (MAILBOXES, SERVERS, CLUSTER)
ROWS_PER_FILE = 250_000  # mailbox rows a Parquet file holds, about
ID_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class SnapshotOptions:
    redis_url: str
    out: str
    master: str | None = None
    read_from: str = "primary"
    max_commands_per_second: float = 10_000
    memory_sample_rate: float = 0.01
    shards_per_partition: int = 64
    snapshot_time: dt.datetime | None = None
    hash_key_file: str | None = None
    driver_memory: str = "2g"


@dataclass(frozen=True)
class SnapshotResult:
    snapshot_id: str
    rows: int
    bytes_written: int
    seconds: float
    commands: int
    peak_partition_rate: int
    partitions: int


def run(options: SnapshotOptions) -> SnapshotResult:
    started = time.monotonic()
    _check(options)
    target = parse(_with_password(options.redis_url))
    when = (options.snapshot_time or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)
    when = when.replace(microsecond=0)

    progress.phase(JOB, f"discovering the servers of {target.redacted}")
    topology = discover(target, options.read_from)
    read = {source.endpoint.address for _, source in topology.reading()}
    progress.phase(
        JOB,
        f"{target.mode.value}: {len(topology.primaries)} primaries, "
        f"{len(topology.servers) - len(topology.primaries)} replicas; reading from "
        + ", ".join(sorted(read)),
    )
    if options.read_from == "replica" and read & {p.endpoint.address for p in topology.primaries}:
        progress.phase(JOB, "a primary has no online replica: its shards are read from it")
    hash_key = _hash_key(topology, options.hash_key_file)
    now_ms = int(when.timestamp() * 1000)
    control = control_rows(topology, now_ms)
    servers = server_rows(topology, read)
    plan = ReadPlan(
        hash_key, options.memory_sample_rate, frozenset(_alive_nodes(topology, now_ms)),
        _defaults(),
    )  # fmt: skip
    partitions = plan_partitions(
        topology, plan, rate=options.max_commands_per_second,
        shards_per_partition=options.shards_per_partition,
    )  # fmt: skip
    progress.phase(JOB, f"reading {keys.SHARDS} shards in {len(partitions)} partitions")
    spark = _session(options)
    out = options.out.rstrip("/")
    counts, sent, peak = _mailboxes(spark, partitions, when, out)

    books, book_reads = book_totals(topology, options.max_commands_per_second)
    # The driver's own reads: identity, nodes, leases and layout, INFO of each server and
    # the slot statistics of each cluster primary's ranges, and the books.
    slot_ranges = sum(len(p.slots) for p in topology.primaries)
    commands = sent + book_reads + 6 + len(servers) + slot_ranges
    lag = [s for s in servers if s["read"] and s["role"] == "replica"]
    common = {
        "mode": target.mode.value, **control, "read_from": options.read_from,
        "memory_sample_rate": options.memory_sample_rate,
        "replica_lag_seconds": max(
            (s["replication_lag_seconds"] or 0.0 for s in lag), default=None
        ),
        "replica_lag_bytes": max((s["replication_lag_bytes"] or 0 for s in lag), default=None),
        "commands": commands, "peak_partition_rate": peak,
        "duration_seconds": time.monotonic() - started,
        "hash_key_id": pseudonyms.key_id(hash_key),
    }  # fmt: skip
    cluster = [
        {"namespace": ns, **books[ns], "rows": counts.get(ns, 0), **common}
        for ns in keys.NAMESPACES
    ]
    _write(_keyed(_frame(spark, SERVERS, servers), when), SERVERS, out)
    _write(_keyed(_frame(spark, CLUSTER, cluster), when), CLUSTER, out)
    snapshot_id = when.strftime(ID_FORMAT)
    where = f"{PARTITION_COLUMN}={when:%Y-%m-%d}/snapshot_id={snapshot_id}"
    written = sum(_bytes_under(spark, f"{out}/{t.name}/{where}") for t in TABLES)
    return SnapshotResult(
        snapshot_id, sum(counts.values()), written, time.monotonic() - started, commands,
        peak, len(partitions),
    )  # fmt: skip


def _check(options: SnapshotOptions) -> None:
    if options.read_from not in ("primary", "replica"):
        raise ConfigError(f"--read-from is primary or replica, not {options.read_from!r}")
    if not 0 <= options.memory_sample_rate <= 1:
        raise ConfigError("--memory-sample-rate is a share between 0 and 1")


def _mailboxes(
    spark: SparkSession, partitions: list[ShardPartition], when: dt.datetime, out: str
) -> tuple[dict[str, int], int, int]:
    """Read the mailboxes in parallel and write them; rows per namespace, the commands the
    partitions sent, and the most one sent within a second."""
    source = source_for(partitions)
    spark.dataSource.register(source)
    rows = spark.read.format(source.name()).load().persist()
    stats = (
        rows.filter(F.col("namespace").isNull())
        .agg(F.sum("partition_commands").alias("sent"), F.max("partition_peak_rate").alias("peak"))
        .first()
    )
    assert stats is not None
    mailboxes = rows.filter(F.col("namespace").isNotNull()).select(*MAILBOXES.names)
    counts = {r["namespace"]: r["count"] for r in mailboxes.groupBy("namespace").count().collect()}
    total = sum(counts.values())
    progress.phase(JOB, f"read {total:,} mailboxes; writing the history")
    files = max(1, min(len(partitions), total // ROWS_PER_FILE))
    _write(_keyed(mailboxes.coalesce(files), when), MAILBOXES, out)
    rows.unpersist()
    return counts, int(stats["sent"] or 0), int(stats["peak"] or 0)


def _session(options: SnapshotOptions) -> SparkSession:
    from spark.session import start

    return start("mediator capacity snapshot", options.master, driver_memory=options.driver_memory)


def _hash_key(topology: Topology, path: str | None) -> bytes:
    """The pseudonym key: the operator's file, else derived from the mediator's key seed,
    the configured one (MEDIATOR_KEY_SEED) before the one the first node stored in Redis,
    as the nodes choose."""
    if path:
        key = Path(path).read_bytes().strip()
        if len(key) < 16:
            raise ConfigError(f"{path}: a pseudonym key needs at least 16 bytes")
        return key
    seed = Settings.from_environment().didcomm.key_seed
    if not seed:
        client = topology.control()
        try:
            stored = client.hget(keys.mediator_identity(), keys.IDENTITY_SEED)
        finally:
            client.close()
        seed = stored.decode() if isinstance(stored, bytes) else (stored or "")
    if not seed:
        raise ConfigError(
            "this deployment has no mediator identity yet (no node has started on it, and "
            "MEDIATOR_KEY_SEED is not set): pass --hash-key-file with a secret of at least "
            "16 bytes"
        )
    try:
        return pseudonyms.derive(bytes.fromhex(seed))
    except ValueError:
        raise ConfigError("MEDIATOR_KEY_SEED must be 64 hexadecimal characters") from None


def _with_password(url: str) -> str:
    """`url` with the password of MEDIATOR_REDIS_PASSWORD or MEDIATOR_REDIS_PASSWORD_FILE
    (and MEDIATOR_REDIS_SENTINEL_AUTH), spliced in as the nodes do: the job reads its
    secrets from the same files."""
    return Settings.from_environment({**os.environ, "MEDIATOR_REDIS_URL": url}).redis.url


def _alive_nodes(topology: Topology, now_ms: int) -> list[str]:
    client = topology.control()
    try:
        found: list[Any] = list(client.zrangebyscore(keys.nodes(), now_ms, "+inf"))
        return [n.decode() if isinstance(n, bytes) else str(n) for n in found]
    finally:
        client.close()


def _defaults() -> dict[str, tuple[tuple[str, str], ...]]:
    """The settings DIDComm mailboxes keep out of their hashes: the operator's, from the
    same MEDIATOR_* environment the nodes read."""
    queue = Settings.from_environment().queue
    config = QueueLimits.defaults(queue).to_config(queue)
    fields = config.to_fields(keys.DIDCOMM_NAMESPACE)[0]
    return {keys.DIDCOMM_NAMESPACE: tuple(sorted(fields.items()))}


def _frame(spark: SparkSession, table: Table, rows: list[dict[str, Any]]) -> DataFrame:
    return spark.createDataFrame(
        [[r.get(n) for n in table.names] for r in rows], table.spark_schema
    )


def _keyed(frame: DataFrame, when: dt.datetime) -> DataFrame:
    return frame.select(
        F.lit(SCHEMA_VERSION).cast("int").alias("schema_version"),
        F.lit(when).cast("timestamp").alias("snapshot_time"),
        *frame.columns,
        F.lit(when.strftime("%Y-%m-%d")).alias(PARTITION_COLUMN),
        F.lit(when.strftime(ID_FORMAT)).alias("snapshot_id"),
    )


def _write(frame: DataFrame, table: Table, out: str) -> None:
    (
        frame.write.mode("overwrite")
        .partitionBy(PARTITION_COLUMN, "snapshot_id")
        .parquet(f"{out}/{table.name}")
    )


def _bytes_under(spark: SparkSession, path: str) -> int:
    jvm: Any = spark.sparkContext._jvm  # Hadoop's FileSystem has no Python API
    hadoop_path = jvm.org.apache.hadoop.fs.Path(path)
    fs = hadoop_path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return int(fs.getContentSummary(hadoop_path).getLength()) if fs.exists(hadoop_path) else 0


if __name__ == "__main__":  # spark-submit spark/snapshot.py ...
    from spark.cli import snapshot_command

    snapshot_command(prog_name="snapshot.py")
