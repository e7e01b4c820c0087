"""The JVM twin of a Spark write task's file-store writer: the Python half (its plan, its commit messages).

Why: a write task that hands its rows to Python as Arrow costs, with the shuffle, about half of Spark's own
Parquet write before the file store writes anything (bench/spark_write_floor.py), so the batch write of a table
Spark clusters one bucket per task is written in the JVM (tablestore/spark/java/.../write/BucketRunWriter.java)
where it applies. tablestore/spark/write.py's Python writer stays the reference: the differential test
(tests/tablestore/test_spark_jvm_write.py) holds the JVM writer to it.

Protocol (tablestore/spark/write.py, step 2'):
1. The JVM write (JvmBatchWrite.java) adds PLAN_OPTION = a file path to the Python write's options.
2. ManagedWriter.__init__ (driver) writes there `write_plan(...)`: usable or not (and why), and what the JVM tasks
   need: bucket directories, each bucket's highest committed sequence number in the job's base snapshot, the
   sequence stride, compression, write-buffer-size, target-file-size, the columns and the primary key.
3. Each JVM task writes its bucket's sorted runs and returns a pickled `JvmTaskCommit` (its file names); a write
   Spark did not shuffle by bucket (`sink.shuffle-by-bucket` = false) has each task write a sorted run into every
   bucket its rows fall in, and name its files per bucket.
4. ManagedWriter.commit turns them into commit messages (`commit_messages`: each file's metadata built from the
   file, filestore.adopt_data_file) and commits them with the Python tasks' as always; abort deletes the files.
The write option SWITCH = false keeps the Python writer (the JVM then asks for no plan).
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import WriterCommitMessage

from filestore import CommitMessage, Partition, adopt_data_file
from tablestore.spark.s3a import hadoop_options, jvm_url
from tablestore.spark import handover

if TYPE_CHECKING:
    from filestore import FileStore, Snapshot, TableSchema

PLAN_OPTION = "__jvm-write-plan"
"""The write option naming the plan file (JvmBatchWrite.PLAN_OPTION, the same constant)."""
SWITCH = "jvm-writer"
"""The write option that, set to false, keeps a write the JVM writer could write on the Python writer."""
JVM_TYPES: dict[pa.DataType, str] = {
    pa.bool_(): "boolean", pa.int8(): "byte", pa.int16(): "short", pa.int32(): "int", pa.int64(): "long",
    pa.float32(): "float", pa.float64(): "double", pa.date32(): "date", pa.string(): "string", pa.binary(): "binary",
}
"""The column types the JVM writer writes, by their name in the plan (WritePlan.sparkType)."""
KEY_TYPES = ("byte", "short", "int", "long", "date")
"""Primary-key types the JVM writer sorts (one column, as a 64-bit integer)."""


def unusable_reason(store: "FileStore", jvm_s3a: bool = False) -> str | None:
    """Why the JVM writer cannot write `store`'s table (None: it can); `jvm_s3a`: the JVM has Hadoop's S3A (the
    write's option JVM_S3A_OPTION), so it writes a warehouse on S3 too."""
    schema = store.schema
    engine = store.options.merge_engine
    if not engine.is_default:  # BucketRunWriter keeps each key's last row: plain deduplication by arrival only
        return f"merge-engine {engine.name}" + (" with a sequence.field" if engine.sequence_fields else "")
    if store.options.file_format != "parquet":
        return f"file.format is {store.options.file_format}"
    if schema.partition_keys:
        return "the table has partition columns"
    if len(schema.primary_keys) != 1:
        return "the table's primary key is not one column"
    from fsspec.implementations.local import LocalFileSystem

    if store.io.object_store and not jvm_s3a:
        return "the warehouse is on S3 and Spark's JVM has no S3A file system (hadoop-aws: tablestore/spark/s3a.py)"
    if not isinstance(store.io.fs, LocalFileSystem) and not store.io.object_store:
        return "the warehouse is neither on the local file system nor on S3"
    for f in schema.arrow_schema:
        if f.type not in JVM_TYPES:
            return f"column {f.name!r} is of type {f.type}"
    if JVM_TYPES[schema.arrow_schema.field(schema.primary_keys[0]).type] not in KEY_TYPES:
        return "the primary key is not an integer or date column"
    return None


def unshuffled_reason(store: "FileStore", has_log: bool) -> str | None:
    """Why a Spark batch write of `store`'s table cannot skip the shuffle by bucket when `sink.shuffle-by-bucket`
    is false (None: it can): each task then writes every bucket, which only the JVM writer does (BucketFanOut.java),
    and a table with a log keeps one writer per bucket, its log's partition."""
    if has_log:
        return "the table has a log"
    return unusable_reason(store, jvm_s3a=True)   # on S3 without S3A the write plan says so: Python then writes


def write_plan(store: "FileStore", sequences: Mapping[tuple[Partition, int], int], table: str, stride: int, *,
               jvm_s3a: bool = False, catalog_options: Iterable[tuple[str, str]] = ()) -> dict[str, Any]:
    """The plan of a JVM write of `store`'s (unpartitioned) table on top of the snapshot whose highest sequence
    number per bucket is `sequences` (LiveFiles.max_sequence_numbers, computed once by the driver; see the module's
    protocol); on S3 the bucket directories are `s3a://` URLs and `hadoop` the S3A settings of `catalog_options`."""
    reason = unusable_reason(store, jvm_s3a)
    if reason is not None:
        return {"usable": False, "reason": f"table {table!r}: {reason}"}
    committed = {b: sequences.get(((), b), -1) for b in range(store.options.bucket)}
    schema = store.schema
    return {
        "usable": True, "table": table,
        "bucket_dirs": [jvm_url(store.io.object_store, store.paths.bucket_dir((), (), b))
                        for b in range(store.options.bucket)],
        "hadoop": hadoop_options(catalog_options) if store.io.object_store else {},
        "base_sequences": [committed[b] for b in range(store.options.bucket)],
        "stride": stride,
        "compression": store.options.file_compression,
        "write_buffer_size": store.options.write_buffer_size,
        "target_file_size": store.options.target_file_size,
        "columns": [{"name": f.name, "type": JVM_TYPES[f.type]} for f in schema.arrow_schema],
        "key": schema.primary_keys[0],
    }


def write_plan_file(path: str, plan: dict[str, Any]) -> None:
    handover.check("jvm-write-plan", plan)
    handover.write_private(path, plan)


@dataclass(frozen=True)
class JvmTaskCommit(WriterCommitMessage):
    """What a JVM write task hands the driver (TaskCommits.java): JSON {task, bucket, rows, files} from a task that
    wrote one bucket, {task, runs: [{bucket, rows, files}, ...]} from one that wrote every bucket of its rows."""

    payload: str

    @property
    def content(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads(self.payload)
        handover.check("jvm-task-commit", value)
        return value

    @property
    def runs(self) -> list[tuple[int, list[str]]]:
        """(bucket, its data file names) per bucket the task wrote."""
        content = self.content
        runs = content["runs"] if "runs" in content else [content]
        return [(int(r["bucket"]), [str(f) for f in r["files"]]) for r in runs]


def commit_messages(store: "FileStore", commits: Sequence[JvmTaskCommit],
                    schema: "TableSchema | None" = None) -> list[CommitMessage]:
    """The file store's commit messages of the JVM tasks' files: each file's metadata built from the file, as a
    file of `schema` (default: the store's), the schema whose columns the write plan gave the tasks (the table's
    schema may have changed since: the files then carry the older schema id and read back under the new one)."""
    of_schema = store.schema if schema is None else schema
    runs = [run for c in commits for run in c.runs]
    where = [(bucket, name) for bucket, files in runs for name in files]
    if not where:
        return []

    def adopt(item: tuple[int, str]) -> Any:
        bucket, name = item
        return adopt_data_file(store.io, store.data_file_path((), bucket, name), of_schema, level=0)

    with ThreadPoolExecutor(max_workers=min(4, len(where))) as pool:
        metas = list(pool.map(adopt, where))
    out, at = [], 0
    for bucket, names in runs:   # `metas` are in the runs' order
        if names:
            out.append(CommitMessage((), bucket, store.options.bucket, added=tuple(metas[at:at + len(names)])))
        at += len(names)
    return out


def data_file_paths(store: "FileStore", commits: Sequence[JvmTaskCommit]) -> list[str]:
    """The paths of the JVM tasks' files (an aborted job deletes them)."""
    return [store.data_file_path((), bucket, name) for c in commits for bucket, files in c.runs for name in files]
