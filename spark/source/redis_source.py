"""The PySpark Python Data Source over the engine's Redis (`format("mediator-redis")`).

Partitions follow the engine's shards: each primary's shards are split into chunks of at
most `shards_per_partition`, and each chunk is read from that primary or from its replica
(`--read-from replica`), one connection per partition, paced by its own command budget.
Rows come out as Arrow batches of the `mailboxes` columns, plus the partition's own
statistics row (namespace null; `partition_*` columns): the job splits those off to report
how many commands were sent and the highest rate a partition reached.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from spark.source.pacing import Pacer
from spark.source.reader import ReadPlan, read_shards
from spark.source.topology import Auth, Endpoint, Topology
from spark.source.wire import Wire
from spark.tables.columns import Column, Table
from spark.tables.mailboxes import MAILBOXES

NAME = "mediator-redis"
STATS = (
    Column("partition_commands", "long", "commands the partition sent"),
    Column("partition_peak_rate", "long", "most commands it sent within one second"),
    Column("partition_seconds", "double", "how long it read"),
    Column("partition_shards", "int", "engine shards it read"),
)
ROWS = Table("mailbox-rows", MAILBOXES.columns + STATS)


@dataclass(frozen=True)
class ShardPartition(InputPartition):
    endpoint: Endpoint
    shards: tuple[int, ...]
    auth: Auth = field(repr=False)
    readonly: bool
    rate: float
    plan: ReadPlan = field(repr=False)


def plan_partitions(
    topology: Topology, plan: ReadPlan, *, rate: float, shards_per_partition: int
) -> list[ShardPartition]:
    out = []
    for primary, source in topology.reading():
        replica = source is not primary
        readonly = replica and topology.mode.value == "cluster"
        shards = sorted(primary.shards)
        for start in range(0, len(shards), shards_per_partition):
            chunk = tuple(shards[start : start + shards_per_partition])
            out.append(ShardPartition(source.endpoint, chunk, topology.auth, readonly, rate, plan))
    return out


class RedisSnapshotSource(DataSource):
    """Options are not used: the job hands the planned partitions over by `register`."""

    partitions_planned: list[ShardPartition] = []

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return ROWS.spark_schema

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(list(self.partitions_planned))


def source_for(partitions: list[ShardPartition]) -> type[RedisSnapshotSource]:
    """A Data Source class carrying these partitions (classes are what Spark registers)."""
    return type(
        "PlannedRedisSnapshotSource", (RedisSnapshotSource,), {"partitions_planned": partitions}
    )


class _Reader(DataSourceReader):
    def __init__(self, partitions: list[ShardPartition]) -> None:
        self._partitions = partitions

    def partitions(self) -> list[InputPartition]:
        return list(self._partitions)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ShardPartition)
        started = time.monotonic()
        pacer = Pacer(partition.rate)
        wire = Wire(partition.auth.connect(partition.endpoint), pacer, readonly=partition.readonly)
        try:
            for batch in read_shards(
                wire, partition.endpoint.address, list(partition.shards), partition.plan
            ):
                yield _widen(batch)
        finally:
            wire.close()
        stats: dict[str, list[Any]] = {c.name: [None] for c in ROWS.columns}
        stats.update(
            partition_commands=[pacer.sent],
            partition_peak_rate=[pacer.peak],
            partition_seconds=[time.monotonic() - started],
            partition_shards=[len(partition.shards)],
            server=[partition.endpoint.address],
        )
        yield ROWS.batch(stats)


def _widen(batch: pa.RecordBatch) -> pa.RecordBatch:
    """A mailboxes batch with the (null) partition statistics columns."""
    arrays = list(batch.columns) + [pa.nulls(batch.num_rows, type=c.arrow_type) for c in STATS]
    return pa.RecordBatch.from_arrays(arrays, schema=ROWS.arrow_schema)
