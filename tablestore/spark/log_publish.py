"""A Spark write's log produced by the executors (tablestore.log_publish has the protocol): the driver commits
metadata only.

1. The JVM wraps the `managed` writes it plans (catalog/LogPublish.java: SQL INSERT, `df.write` and `writeStream`
   with the tablestore jar; where `PRODUCERS_CONF` says the executors produce) and names a file in the write's
   option `PLAN_OPTION`. The Python commit then publishes
   its snapshot with the log pending (`commit_prepared(defer_log=True)`) and writes there the plans of every
   pending snapshot of the table (its own, and any a dead writer left), with the table they are of.
2. After the Python commit, the JVM runs one Spark job per commit: a read of the `managed` source with the option
   `READ_OPTION` = that file, whose input partitions are (snapshot, bucket) pairs: each executor task produces
   one bucket (`publish_bucket`) and returns the offset after its records (`publish_schema`).
3. The JVM hands the offsets to the catalog service (`record`), which publishes the log-only snapshots.
Without the jar (a session PySpark's static registration alone serves), the option is never set: the driver
produces the log as before (tablestore.writer.TableWriter.commit_prepared).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import IntegerType, LongType, StructField, StructType

from tablestore import log_publish
from tablestore.log_publish import PublishPlan
from tablestore.spark import handover
from tablestore.spark.source_options import TableRef
from tablestore.spark.pyworker import freeze_imports

PRODUCERS_CONF = "spark.tablestore.log.producers"
"""Session setting (catalog/LogPublish.java, the same constant): `executors` (the protocol above), `driver` (the
driver produces, as without the jar), `auto` (default): the executors, except in a local session, whose executors
are the driver's own threads, where the log job would only add a job per commit."""
PLAN_OPTION = "__log-publish-plan"
"""Write option set by the JVM (catalog/LogPublish.java, the same constant): where the commit leaves its plans."""
READ_OPTION = "__log-publish"
"""Read option set by the JVM (catalog/LogPublish.java, the same constant): the plans to publish."""
TASKS_KEY = "task_buckets"
"""The plan file's list of the log job's tasks' buckets, in the order of its input partitions: the JVM asks for each
task to run on the executor of its bucket (catalog/LogTaskPlacement.java), which keeps that bucket's producer."""


def publish_schema() -> StructType:
    """The rows of the log job: per (snapshot, bucket), the offset after its records (null: none)."""
    return StructType([StructField("snapshot_id", LongType()), StructField("bucket", IntegerType()),
                       StructField("end_offset", LongType())])


def write_plans(path: str, ref: TableRef, plans: Sequence[PublishPlan]) -> None:
    """Step 1: the plans for the JVM, or no file when nothing is pending."""
    if not plans:
        if os.path.exists(path):
            os.remove(path)
        return
    body = {"table": {"warehouse": ref.warehouse, "identifier": ref.identifier,
                      "catalog_options": [list(kv) for kv in ref.catalog_options]},
            "plans": [p.to_dict() for p in plans], TASKS_KEY: [b for _, b in tasks(plans)]}
    handover.write_private(path, body)


def read_plans(path: str) -> tuple[TableRef, list[PublishPlan]]:
    with open(path) as f:
        body = json.load(f)
    table = body["table"]
    ref = TableRef(table["warehouse"], table["identifier"],
                   tuple((str(k), str(v)) for k, v in table["catalog_options"]))
    return ref, [PublishPlan.from_dict(d) for d in body["plans"]]


def tasks(plans: Sequence[PublishPlan]) -> list[tuple[PublishPlan, int]]:
    """The log job's tasks, in the order of its input partitions: (plan, bucket), each plan's buckets in turn."""
    return [(p, b) for p in plans for b in p.buckets]


@dataclass(frozen=True)
class BucketTask(InputPartition):
    ref: TableRef
    plan: PublishPlan
    bucket: int


class LogPublishReader(DataSourceReader):
    """Step 2: one input partition per (pending snapshot, bucket)."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.path = str(dict(options)[READ_OPTION])

    def partitions(self) -> Sequence[InputPartition]:
        ref, plans = read_plans(self.path)
        parts: list[InputPartition] = [BucketTask(ref, p, b) for p, b in tasks(plans)]
        return parts or [BucketTask(ref, PublishPlan(0, "", 0, ()), -1)]   # Spark needs one partition

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, BucketTask)
        if partition.bucket < 0:
            return
        from tablestore.spark.profiling import profiled

        with profiled(f"log-task-b{partition.bucket}"):
            handle = partition.ref.handle()
            if handle.log is None:
                return
            end = log_publish.publish_bucket(handle.identifier, handle.store, handle.log, partition.plan,
                                             partition.bucket)
        yield partition.plan.snapshot_id, partition.bucket, end


def record(args: Mapping[str, Any]) -> list[int]:
    """Step 3 (a catalog-service action): the log-only snapshots of the plans in `args["plan"]`, with the offsets
    `args["published"]` ([snapshot id, bucket, end offset or None], ...); their ids."""
    ref, plans = read_plans(str(args["plan"]))
    offsets: dict[int, dict[int, int]] = {}
    for snapshot_id, bucket, end in args.get("published") or []:
        if end is not None:
            offsets.setdefault(int(snapshot_id), {})[int(bucket)] = int(end)
    store = ref.handle().store
    recorded = []
    for plan in plans:
        sid = log_publish.record_published(store, plan, offsets.get(plan.snapshot_id, {}))
        if sid is not None:
            recorded.append(sid)
    return recorded


freeze_imports()   # a PySpark worker's collections after each task skip what is loaded by now (pyworker)
