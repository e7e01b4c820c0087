"""Batch reads of the `managed` data source: plan on the driver, merge-read on executors, Arrow end to end.

1. `pushFilters` (driver-side worker, only when a query has filters) translates Spark's filters
   (`tablestore.spark.filters`): all of them prune, the exact ones are applied in Arrow and leave Spark's plan
   (unless the JVM reads raw splits, step 4: then Spark applies every filter to the rows).
2. `partitions` resolves ONE snapshot (the latest, or `snapshot-id` / `timestamp-ms`) and plans its splits with
   the pruning filter: one input partition per (partition, bucket). Every task reads that snapshot's files,
   so a read of a table being written sees one snapshot.
3. `read` (executor) reopens the table, merge-reads the split (`FileStore.new_read`) with the exact filter, and
   returns Arrow batches in exactly the Arrow schema PySpark expects. A split that is one sorted run without
   deletes is read without a merge: `SplitRead` decides that, the same for every reader (Python API, compaction).
4. Around the Python worker: when the JVM provider (the tablestore Spark jar) plans the scan, it passes a file path
   in the option `RAW_PLAN_OPTION`. `partitions` then leaves out the splits Spark's own vectorized Parquet reader
   can read as they are (`SplitRead.plain_files`: one sorted run, no deletes; Parquet files on
   the local disk, or on S3 (below); flat column types whose Parquet reading gives the table's Spark types) and
   writes them to that file as JSON: `{"python_partitions": n, "raw": [[file path, ...] per split, in key
   order]}` (the JVM reads them with the scan's columns). The JVM
   reads those splits itself (jvm/read/RawSplits.java, `RawSplitReader`) and the other `n` through this reader.
   A query's filters go to the JVM's reader as a Parquet predicate (jvm/read/ParquetPredicates.java), which skips
   the row groups and pages their statistics rule out (files are sorted by key: a key range reads a few), and
   `pushFilters` hands every filter back to Spark, which applies them to the rows.
   A table with deletion vectors (filestore.deletion) hands its plain splits (`Split.plain`) over raw too, whatever
   their runs: every file of the split, and per raw split `"vectors": [vector or null per file]` (the vector file's
   path or URL, Delta's offset and size: filestore.dvformat), which the JVM's reader decodes
   (jvm/mirror/DeletionVector.java) and whose positions it leaves out (the rows' own positions in their file, as
   Spark's Parquet reader gives them with row groups and pages skipped). Such a split's rows are in no key order;
   nothing of the JVM's raw reading relies on one.
   The splits a deduplicating table needs merged (`SplitRead.merge_runs`: several sorted runs or deletes, the
   default merge engine; keys of `_jvm_key` types) go to the JVM too, as `"merge": [[[file, ...] per run, newest
   first] per split]` with the table's `"keys"`: jvm/read/MergeSplits.java merges them (per key the record of the
   highest sequence number, a DELETE winner dropped: filestore/merge.py's rule), their row groups skipped by the
   filters on key columns only.
   A warehouse on S3 qualifies when the JVM has Hadoop's S3A (it says so with the option `s3a.JVM_S3A_OPTION`,
   tablestore/spark/s3a.py): the files are then `s3a://` URLs, and the plan's `"hadoop"` holds the S3A settings of
   the read's catalog options (`fs.s3a.endpoint`, ...), which the JVM's tasks open the bucket with.
5. Without a Python worker: a batch scan by either front door (jvm/catalog/ManagedScan.java) first asks the catalog
   service (`plan_in_service`, the same steps 1, 2 and 4 on the filters' hand-over form,
   `filters.translate_predicates`). When the JVM reads every split (raw or merged), that plan is the scan's and no
   Python worker runs: PySpark
   starts one per Python data source plan (and one per filter push-down), about 0.1 s each on 4.1. Otherwise the
   Python source plans the scan as above.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Mapping, Sequence


import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pyspark.sql.datasource import DataSourceReader, InputPartition

from filestore import Split
from tablestore.spark.source_options import TableRef, int_option, table_ref
from tablestore.spark.filters import columns_of, translate
from tablestore.spark.s3a import hadoop_options, jvm_marked_s3a, jvm_url
from tablestore.spark.types import read_schema, to_spark_batch
from tablestore.spark import handover
from tablestore.spark.pyworker import freeze_imports

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from filestore import DataFileMeta, FileStore

RAW_PLAN_OPTION = "__raw-plan"
"""Set by the JVM (jvm/read/RawSplits.java, the same constant): where `partitions` writes the splits the JVM
reads with Spark's Parquet reader."""


def _raw_readable(type_: pa.DataType) -> bool:
    """Types Spark's Parquet reader gives back as the table's Spark type (see tablestore.spark.types). Timestamps:
    the data files store them as Parquet TIMESTAMP(MILLIS|MICROS|NANOS) (seconds as MILLIS), `isAdjustedToUTC`
    true with a time zone and false without. Spark reads a UTC-adjusted one as TIMESTAMP whatever its unit, a
    local one as TIMESTAMP_NTZ only in MICROS (MILLIS it reads as TIMESTAMP: not the table's type), and NANOS not
    as a timestamp at all."""
    t = pa.types
    return (t.is_boolean(type_) or t.is_int8(type_) or t.is_int16(type_) or t.is_int32(type_) or t.is_int64(type_)
            or t.is_float32(type_) or t.is_float64(type_) or t.is_string(type_) or t.is_large_string(type_)
            or t.is_binary(type_) or t.is_large_binary(type_) or t.is_date32(type_)
            or (t.is_decimal128(type_) and type_.precision <= 38)
            or (t.is_timestamp(type_) and (type_.unit == "us" or (type_.tz is not None and type_.unit in ("s", "ms")))))


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
        table_schema: pa.Schema = handle.schema.arrow_schema
        self.partition_keys = set(handle.schema.partition_keys)
        names = [f.name for f in schema]
        # a query planned before columns were added reads the columns it planned (added columns come last)
        if names != table_schema.names[:len(names)] or not names:
            from tablestore.spark.source_options import DataSourceOptionError

            raise DataSourceOptionError(
                f"table {self.ref.identifier!r}: the read schema {names} is not the table's "
                f"columns {table_schema.names}; do not give .schema() to a managed read")
        self.table_schema = pa.schema([table_schema.field(n) for n in names])
        self.spark_schema = schema
        self.prune: pc.Expression | None = None
        self.exact: pc.Expression | None = None
        self.raw_plan: str | None = options.get(RAW_PLAN_OPTION)
        self.jvm_s3a = jvm_marked_s3a(options)

    def pushFilters(self, filters: list[Any]) -> Iterable[Any]:
        done = translate(filters, self.table_schema)
        self.prune, self.exact = done.prune, done.exact
        kept = set(done.kept)
        for i, f in enumerate(filters):
            # raw splits are read by row group (the JVM skips the groups the filters rule out): Spark filters their
            # rows, except by partition values (the plan has only the matching partitions' files)
            if i in kept or (self.raw_plan is not None and not columns_of(f) <= self.partition_keys):
                yield f

    def partitions(self) -> Sequence[InputPartition]:
        from tablestore.spark.profiling import profiled

        with profiled("read-plan"):
            return self._partitions()

    def _partitions(self) -> Sequence[InputPartition]:
        store = self.ref.handle().store
        snapshot = store.resolve_snapshot(self.snapshot_id, self.timestamp_ms)
        splits = store.new_scan().plan(snapshot, self.prune)
        if self.raw_plan is not None:
            plan, splits = raw_plan(store, self.ref, self.table_schema, splits, self.jvm_s3a)
            handover.write_private(self.raw_plan, plan)
        return [SplitPartition(s) for s in splits] or [SplitPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SplitPartition)
        target = read_schema(self.spark_schema)
        if partition.split is None:
            return iter(())
        store = self.ref.handle().store
        # a bucket that is one sorted run without deletes is read without a merge (SplitRead decides, for every reader)
        rows = store.new_read(self.table_schema.names, self.exact).read(partition.split)
        return iter(to_spark_batch(rows, target).to_batches())


def raw_plan(store: "FileStore", ref: TableRef, table_schema: pa.Schema, splits: Sequence[Split],
             jvm_s3a: bool) -> tuple[dict[str, Any], list[Split]]:
    """Step 4: the raw-plan document of `splits` (a scan of `table_schema`'s columns), and the splits left for
    Python to read."""
    raw, vectors, merged, rest = _raw_splits(store, table_schema, splits, jvm_s3a)
    plan: dict[str, Any] = {"python_partitions": len(rest), "raw": raw}
    if any(v is not None for split in vectors for v in split):
        plan["vectors"] = vectors
    if merged:
        plan["merge"] = merged
        plan["keys"] = list(store.schema.key_columns)
    if (raw or merged) and store.io.object_store:
        plan["hadoop"] = hadoop_options(ref.catalog_options)
    handover.check("raw-plan", plan)
    return plan, rest


RawVector = dict[str, Any] | None
"""A raw file's deletion vector in the raw plan: {"path": the vector file's path or URL, "offset": Delta's offset of
its size field, "size": the serialized vector's bytes} (filestore.dvformat), or None (no rows deleted)."""


def _raw_splits(store: "FileStore", table_schema: pa.Schema, splits: Sequence[Split], jvm_s3a: bool
                ) -> tuple[list[list[str]], list[list[RawVector]], list[list[list[str]]], list[Split]]:
    """The splits Spark's Parquet reader can read as they are (their files' absolute paths, or `s3a://` URLs, and
    per file its deletion vector or None), the splits the JVM merges (their runs' files, newest run first:
    `SplitRead.merge_runs`, keys of `_jvm_key` types) and the others.

    A plain split (`Split.plain`: a table with deletion vectors, filestore.deletion) is raw whatever its runs: its
    rows are its files' rows minus their vectors' positions, in no key order (the JVM relies on none)."""
    if (store.options.file_format != "parquet"
            or not (isinstance(store.io.arrow_fs(), pafs.LocalFileSystem) or (store.io.object_store and jvm_s3a))
            or not all(_raw_readable(f.type) for f in table_schema)):
        return [], [], [], list(splits)
    if store.schema.arrow_schema.names != table_schema.names:
        return [], [], [], list(splits)   # the table gained columns since the query was planned: Python projects them
    read = store.new_read(None, None)
    mergeable = all(_jvm_key(store.schema.arrow_schema.field(k).type) for k in store.schema.key_columns)

    def url(split: Split, f: DataFileMeta) -> str:
        return jvm_url(store.io.object_store, store.data_file_path(split.partition, split.bucket, f.file_name))

    def vector(f: DataFileMeta) -> RawVector:
        ref = f.deletion_vector
        if ref is None:
            return None
        return {"path": jvm_url(store.io.object_store, f"{store.paths.root}/{ref.path}"), "offset": ref.offset,
                "size": ref.size}

    raw: list[list[str]] = []
    vectors: list[list[RawVector]] = []
    merged: list[list[list[str]]] = []
    rest: list[Split] = []
    for split in splits:
        files = read.plain_files(split)
        if files is None and split.plain and read.merge_runs(split) is not None:
            files = split.files   # merge_runs: every file written under a schema the raw read reads as it is
        runs = None if files is not None or not mergeable else read.merge_runs(split)
        if files is not None:
            raw.append([url(split, f) for f in files])
            vectors.append([vector(f) for f in files])
        elif runs is not None:
            merged.append([[url(split, f) for f in run] for run in runs])
        else:
            rest.append(split)
    return raw, vectors, merged, rest


def _jvm_key(type_: pa.DataType) -> bool:
    """Key types the JVM's merge compares in the key codec's order (filestore/keycodec.py: integers by value,
    strings by their UTF-8 bytes, as Spark's UTF8String compares them)."""
    t = pa.types
    return (t.is_boolean(type_) or t.is_integer(type_) and t.is_signed_integer(type_) or t.is_string(type_)
            or t.is_large_string(type_) or t.is_date32(type_))


def plan_in_service(args: Mapping[str, Any]) -> dict[str, Any] | None:
    """The catalog service's `plan_read`: a JVM batch scan (SQL or `format("managed")`) planned without a Python worker
    (PySpark starts one per Python data source plan: 0.1 s each on 4.1). `args`: the scan's options
    ("read_options", the table's identity injected), the columns it was built with ("columns") and Spark's pushed
    filters ("predicates", the `predicates` hand-over format, one node per filter). When the JVM reads every split
    of the plan, raw or merged (steps 2 and 4, the same functions): {"plan": the raw-plan document, "spark_filters":
    the indices of the filters Spark still evaluates (those with no exact translation, and every filter on a data
    column: Spark filters the JVM's rows)}; None when some split needs Python's reader (or anything is amiss: the Python
    data source then plans the scan, and raises its errors, as before)."""
    from tablestore.spark import compact_job, log_publish
    from tablestore.spark.filters import translate_predicates
    from tablestore.spark.predicates import columns, parse
    from tablestore.spark.source_options import CHANGES_OPTION, check_options

    options = {str(k): str(v) for k, v in dict(args["read_options"]).items()}
    if {k.lower() for k in options} & {log_publish.READ_OPTION, compact_job.READ_OPTION, CHANGES_OPTION}:
        return None
    check_options(options, "read")
    ref = table_ref(options)
    handle = ref.handle()
    names = [str(n) for n in args["columns"]]
    table_schema: pa.Schema = handle.schema.arrow_schema
    if not names or names != table_schema.names[:len(names)]:
        return None
    schema = pa.schema([table_schema.field(n) for n in names])
    nodes = parse(str(args.get("predicates") or "[]"))
    done = translate_predicates(nodes, schema)
    store = handle.store
    snapshot = store.resolve_snapshot(int_option(options, "snapshot-id", ref.identifier),
                                      int_option(options, "timestamp-ms", ref.identifier))
    splits = store.new_scan().plan(snapshot, done.prune)
    plan, rest = raw_plan(store, ref, schema, splits, jvm_marked_s3a(options))
    if rest:
        return None
    partition_keys = set(handle.schema.partition_keys)
    kept = set(done.kept)
    return {"plan": plan, "spark_filters": [i for i, n in enumerate(nodes)
                                            if i in kept or not columns(n) <= partition_keys]}


freeze_imports()   # a PySpark worker's collections after each task skip what is loaded by now (pyworker)
