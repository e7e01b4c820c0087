"""Batch reads of the `managed` data source: plan on the driver, merge-read on executors, Arrow end to end.

1. `pushFilters` (driver-side worker, only when a query has filters) translates Spark's filters
   (`tablestore.spark.filters`): all of them prune, the exact ones are applied in Arrow and leave Spark's plan.
2. `partitions` resolves ONE snapshot (the latest, or `snapshot-id` / `timestamp-ms`) and plans its splits with
   the pruning filter: one input partition per (partition, bucket). Every task reads that snapshot's files,
   so a read of a table being written sees one snapshot.
3. `read` (executor) reopens the table, merge-reads the split (`FileStore.new_read`) with the exact filter, and
   returns Arrow batches in exactly the Arrow schema PySpark expects. A split that is one sorted run without
   deletes is read without a merge: `SplitRead` decides that, the same for every reader (Python API, compaction).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from filestore import Split
from tablestore.spark.datasource import TableRef, int_option, table_ref
from tablestore.spark.filters import translate
from tablestore.spark.types import read_schema, to_spark_batch

if TYPE_CHECKING:
    from pyspark.sql.types import StructType


@dataclass(frozen=True)
class SplitPartition(InputPartition):
    """One (partition, bucket) split of the planned snapshot."""

    split: Split | None   # None: the table has no rows (Spark still runs one task)


class ManagedReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: "StructType") -> None:
        self.ref: TableRef = table_ref(options)
        handle = self.ref.handle()
        self.snapshot_id = int_option(options, "snapshot-id", self.ref.identifier)
        self.timestamp_ms = int_option(options, "timestamp-ms", self.ref.identifier)
        self.table_schema: pa.Schema = handle.schema.arrow_schema
        if [f.name for f in schema] != self.table_schema.names:
            from tablestore.spark.datasource import DataSourceOptionError

            raise DataSourceOptionError(
                f"table {self.ref.identifier!r}: the read schema {[f.name for f in schema]} is not the table's "
                f"columns {self.table_schema.names}; do not give .schema() to a managed read")
        self.spark_schema = schema
        self.prune: pc.Expression | None = None
        self.exact: pc.Expression | None = None

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        done = translate(filters, self.table_schema)
        self.prune, self.exact = done.prune, done.exact
        for i in done.kept:
            yield filters[i]

    def partitions(self) -> Sequence[InputPartition]:
        store = self.ref.handle().store
        snapshot = store.resolve_snapshot(self.snapshot_id, self.timestamp_ms)
        splits = store.new_scan().plan(snapshot, self.prune)
        return [SplitPartition(s) for s in splits] or [SplitPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SplitPartition)
        target = read_schema(self.spark_schema)
        if partition.split is None:
            return iter(())
        store = self.ref.handle().store
        # a bucket that is one sorted run without deletes is read without a merge (SplitRead decides, for every reader)
        rows = store.new_read(None, self.exact).read(partition.split)
        return iter(to_spark_batch(rows, target).to_batches())
