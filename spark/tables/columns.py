"""A table's columns written down once, as both Arrow and Spark types.

Every table carries `schema_version` (`SCHEMA_VERSION`: a reader refuses a newer one), the
`snapshot_time` that keys one snapshot and the `snapshot_date` it is partitioned by.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

SCHEMA_VERSION = 1
PARTITION_COLUMN = "snapshot_date"
KEY_COLUMNS = ("schema_version", "snapshot_time")

_SIMPLE: dict[str, tuple[pa.DataType, T.DataType]] = {
    "string": (pa.string(), T.StringType()),
    "int": (pa.int32(), T.IntegerType()),
    "long": (pa.int64(), T.LongType()),
    "double": (pa.float64(), T.DoubleType()),
    "boolean": (pa.bool_(), T.BooleanType()),
    "array<int>": (pa.list_(pa.int32()), T.ArrayType(T.IntegerType())),
}


@dataclass(frozen=True)
class Column:
    name: str
    kind: str  # a key of _SIMPLE, or a struct list built by `struct_list`
    doc: str
    arrow: pa.DataType | None = None
    spark: T.DataType | None = None

    @property
    def arrow_type(self) -> pa.DataType:
        return self.arrow if self.arrow is not None else _SIMPLE[self.kind][0]

    @property
    def spark_type(self) -> T.DataType:
        return self.spark if self.spark is not None else _SIMPLE[self.kind][1]


def struct_list(name: str, fields: list[tuple[str, str]], doc: str) -> Column:
    """A column holding a list of records, e.g. a server's per-slot statistics."""
    arrow = pa.list_(pa.struct([(n, _SIMPLE[k][0]) for n, k in fields]))
    spark = T.ArrayType(T.StructType([T.StructField(n, _SIMPLE[k][1]) for n, k in fields]))
    return Column(name, "struct-list", doc, arrow, spark)


@dataclass(frozen=True)
class Table:
    name: str
    columns: tuple[Column, ...]  # what the snapshot reads; the key columns come on top

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.arrow_type) for c in self.columns])

    @property
    def spark_schema(self) -> T.StructType:
        return T.StructType([T.StructField(c.name, c.spark_type) for c in self.columns])

    def batch(self, rows: dict[str, list[Any]]) -> pa.RecordBatch:
        """An Arrow batch of these columns from column lists (all of one length)."""
        return pa.RecordBatch.from_arrays(
            [pa.array(rows[c.name], type=c.arrow_type) for c in self.columns],
            schema=self.arrow_schema,
        )

    def empty_columns(self) -> dict[str, list[Any]]:
        return {c.name: [] for c in self.columns}
