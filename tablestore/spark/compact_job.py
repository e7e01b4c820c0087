"""`CALL managed.system.compact(...)` on the executors: the buckets are rewritten by Spark tasks, one per bucket,
and the driver commits metadata only (issue 21: nothing in the data path stays on one process).

1. The JVM (catalog/CompactJob.java, where `RUNNERS_CONF` says the executors compact) reads the `managed` source
   with the option `READ_OPTION` = the call's arguments as JSON (`full`, `partitions`). The read's planning, in the
   driver's Python planner, picks what to compact on the latest snapshot (`filestore.plan_compaction`): one input
   partition per bucket.
2. Each task opens the table, reads that snapshot's live files of its bucket and rewrites them
   (`filestore.compact` of one bucket), and returns its commit messages as one row (`task_schema`): the files it
   added, the files they replace. A task that fails and is retried leaves the first attempt's files unreferenced
   (orphans for `remove_orphan_files`), as a failed write task does.
3. The JVM hands the rows to the catalog service (`commit`), which publishes one COMPACT snapshot on the planned
   snapshot (a concurrent compaction of the same files fails it cleanly: its files are deleted) and reports as
   `tablestore compact` does.

Without the jar (PySpark's static registration alone) there is no CALL; `tablestore compact` and `Table.compact`
compact in their own process, on its worker pool.
"""
from __future__ import annotations

import base64
import json
import pickle
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import BooleanType, IntegerType, LongType, StringType, StructField, StructType

import filestore
from filestore import CommitMessage, Partition
from tablestore import maintenance
from tablestore.describe import partition_selector
from tablestore.errors import TableStoreError
from tablestore.spark.source_options import TableRef, table_ref
from tablestore.table import Table
from tablestore.spark.pyworker import freeze_imports

RUNNERS_CONF = "spark.tablestore.compaction.runners"
"""Session setting (catalog/CompactJob.java, the same constant): `executors` (the protocol above), `driver` (the
catalog service on the driver compacts, on its worker pool), `auto` (default): the executors, except in a local
session, whose executors are the driver's own threads, where the job would only add Python workers."""
READ_OPTION = "__compact"
"""Read option set by the JVM (catalog/CompactJob.java, the same constant): the call's arguments as JSON."""


def task_schema() -> StructType:
    """The rows of the compaction job: per bucket, the planned snapshot and the task's commit messages."""
    return StructType([StructField("snapshot_id", LongType()), StructField("bucket", IntegerType()),
                       StructField("full", BooleanType()), StructField("messages", StringType())])


@dataclass(frozen=True)
class BucketTask(InputPartition):
    ref: TableRef
    snapshot_id: int   # 0: nothing to compact (Spark needs one partition)
    partition: Partition
    bucket: int
    full: bool


class CompactReader(DataSourceReader):
    """Steps 1 and 2: one input partition per bucket to compact."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.ref = table_ref(options)
        call = json.loads(dict(options)[READ_OPTION])
        self.full = bool(call.get("full", True))
        self.partitions_text = call.get("partitions")

    def partitions(self) -> Sequence[InputPartition]:
        handle = self.ref.handle()
        store, schema = handle.store, handle.schema
        latest = store.snapshots.latest_id()
        specs = maintenance.parse_partition_specs([self.partitions_text]) if self.partitions_text else None
        selected = partition_selector(handle.identifier, schema.arrow_schema, schema.partition_keys, specs)
        tasks: list[InputPartition] = []
        if latest is not None:
            snapshot = store.snapshots.get(latest)
            tasks = [BucketTask(self.ref, snapshot.id, partition, bucket, self.full) for partition, bucket, _unit
                     in filestore.plan_compaction(store.context, snapshot, full=self.full, partitions=selected)]
        return tasks or [BucketTask(self.ref, 0, (), -1, self.full)]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, BucketTask)
        if partition.bucket < 0:
            return
        from tablestore.spark.profiling import profiled

        with profiled(f"compact-task-b{partition.bucket}"):
            store = partition.ref.handle().store
            snapshot = store.snapshots.get(partition.snapshot_id)
            live = store.live_files(snapshot)
            messages = filestore.compact(store.context, snapshot, full=partition.full, live=live,
                                         buckets=[(partition.partition, partition.bucket)])
        yield partition.snapshot_id, partition.bucket, partition.full, _encode(messages)


def _encode(messages: list[CommitMessage]) -> str:
    return base64.b64encode(pickle.dumps(messages)).decode("ascii")


def _decode(text: str) -> list[CommitMessage]:
    found = pickle.loads(base64.b64decode(text))
    if not isinstance(found, list) or not all(isinstance(m, CommitMessage) for m in found):
        raise TableStoreError("a compaction task returned something that is not its commit messages")
    return found


def commit(table: Table, args: Mapping[str, Any]) -> dict[str, Any]:
    """Step 3 (the catalog service's `compact_commit`): one COMPACT snapshot of the tasks' rows `args["tasks"]`
    ([snapshot id, bucket, full, messages], ...), reported as `tablestore compact` reports (`before`: the selected
    partitions just before this commit; `seconds`: the job's `args["job_seconds"]` and the commit's)."""
    started = time.monotonic()
    tasks = list(args.get("tasks") or [])
    specs = maintenance.parse_partition_specs([str(args["partitions"])]) if args.get("partitions") else []
    before = maintenance.shape(maintenance.partition_details(table, specs))
    messages = [m for _sid, _bucket, _full, text in tasks for m in _decode(str(text))]
    planned = {int(sid) for sid, *_ in tasks}
    if messages and len(planned) != 1:
        raise TableStoreError(f"table {table.name!r}: the compaction tasks were planned on several snapshots "
                              f"{sorted(planned)}")
    sid = table.commit_compaction(messages, planned.pop()) if messages else None
    after = maintenance.shape(maintenance.partition_details(table, specs))
    seconds = float(args.get("job_seconds") or 0) + time.monotonic() - started
    return {"table": table.name, "snapshot_id": sid, "full": args.get("full") is not False, "partitions": specs,
            "seconds": round(seconds, 3), "before": before, "after": after}


freeze_imports()   # a PySpark worker's collections after each task skip what is loaded by now (pyworker)
