"""Streaming reads of a table's changes: `spark.readStream.format("managed").load("db.orders")` (with the tablestore
Spark jar on the classpath, whose JVM provider asks for the changelog schema: see datasource.CHANGES_OPTION), or
`tablestore.spark.read_changes(spark, "db.orders", scan=...)`, i.e.
`spark.readStream.format("managed").schema(<_row_kind + the table's columns>).load("db.orders")`, which needs no jar.

Offsets (JSON, checkpointed by Spark; a restart resumes exactly at the last committed end):
- a table with a log: `{"base": S or null, "log": {partition: offset}}`. `scan=full` starts with base = the
  latest snapshot S and the log at S's stored offsets (the first batch is S's rows as +I, then the log: no
  duplicate, no gap); `latest` at the log's end now; `from-timestamp` at the first record at or after
  `scan.timestamp-ms` (moved back to the start of the commit it falls in, when `changelog.normalize`). A batch
  reads the log offsets [start, end) of each partition (read_committed for transactional consistency), end = the
  last stable offset when planned, capped by `max-rows-per-trigger`.
  `changelog.normalize` (the option of the read, else the table's; default true) on a primary-key table: each
  partition's range is one task, which turns it into the changelog of its commits (tablestore.log_changes, the
  rule `Table.read_changes` applies too) with no state from earlier batches; a capped end is moved to a commit
  boundary, so a commit is never split. Otherwise the log's records as stored, all ranges in one task.
- a table without a log (`log.system` = none): `{"base": S or null, "snapshot": N}`, N the last snapshot streamed;
  each later snapshot's changes come from comparing it with its parent (tablestore.snapshot_changes: -U/+U, -D
  with the old row; compactions give nothing). `full` starts with the latest snapshot's rows as +I.
`Trigger.AvailableNow` reads up to the end found when the query starts, then stops.

`consumer-id` (filestore.consumers, tablestore.consumers): the stream's progress is recorded in the table at each
micro-batch commit (`commit(end)`: the log offsets of `end`, or for a table without a log its next snapshot,
end's + 1; and when Spark plans a micro-batch from a committed end, `latestOffset(start)`, as Spark calls
`commit(end)` only when it plans the next batch: so the last batch of a `Trigger.AvailableNow` run is recorded
too), so expiry keeps the snapshots it still needs; a query started with no checkpointed offsets (Spark
asks `initialOffset`) and an existing consumer resumes at the consumer's position, whatever `scan` says. The
checkpoint, when there is one, wins: the consumer is then only a record of progress.
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

try:  # PySpark >= 4.2: admission control (Spark calls latestOffset(start, limit)) and Trigger.AvailableNow
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
    ADMISSION_CONTROL = True
except ImportError:  # PySpark 4.1: Spark calls latestOffset() without arguments; every trigger reads all there is
    ADMISSION_CONTROL = False

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in base class: PySpark 4.1 has no such interface (AvailableNow reads up to one end offset)."""

import catalog
from filestore import CommitKind, ConsumerManager, FileStore, check_consumer_id
from logstore import ROW_KIND_COLUMN, insert_kinds
from tablestore.faults import fault_point
from tablestore.log_changes import ChangeSource, commit_end, commit_start, range_changes
from tablestore.log_publish import handover_snapshot
from tablestore.snapshot_changes import snapshot_changes, snapshot_records
from tablestore.spark.source_options import DataSourceOptionError, TableRef, int_option, table_ref
from tablestore.spark.pyworker import freeze_imports

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

SCANS = ("full", "latest", "from-timestamp")
_CONSUMER_REFRESH_S = 60.0
"""How often a stream standing still rewrites its consumer, so `consumer.expiration-time` never expires it."""


@dataclass(frozen=True)
class ChangesPartition(InputPartition):
    """One piece of a batch: a snapshot's rows as +I (`base`), log ranges as stored (`log`), one partition's log
    range as the changelog of its commits (`commits`), or the changes from snapshot `parent` to `snapshot`."""

    kind: str
    base: int | None = None
    log_start: tuple[tuple[int, int], ...] = ()
    log_end: tuple[tuple[int, int], ...] = ()
    parent: int | None = None
    snapshot: int | None = None
    stored: bool = False   # a snapshot's records as written (`_stored_records`), not its changelog


def changes_schema(ref: TableRef) -> pa.Schema:
    schema = ref.handle().schema.arrow_schema
    return pa.schema([pa.field(ROW_KIND_COLUMN, pa.string(), False), *schema])


class ManagedStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str], schema: "StructType") -> None:
        self.ref = table_ref(options)
        table = self.ref.identifier
        names = [f.name for f in schema]
        if not names or names[0] != ROW_KIND_COLUMN:
            raise DataSourceOptionError(
                f"table {table!r}: a streaming read returns `{ROW_KIND_COLUMN}` + the table's columns; without the "
                "tablestore Spark jar on the session's classpath (spark.jars = tablestore.spark.jar_path()) Spark "
                "gives a streaming read the batch schema: put the jar there, or use "
                "tablestore.spark.read_changes(spark, table), which gives Spark that schema")
        self.scan = options.get("scan", "full").lower()
        if self.scan not in SCANS:
            raise DataSourceOptionError(f"table {table!r}: option 'scan' must be one of {SCANS}, got {self.scan!r}")
        self.timestamp_ms = int_option(options, "scan.timestamp-ms", table)
        if self.scan == "from-timestamp" and self.timestamp_ms is None:
            raise DataSourceOptionError(f"table {table!r}: scan 'from-timestamp' needs option 'scan.timestamp-ms'")
        self.normalize = _normalize(options, self.ref)
        self.stored = _stored_records(options, self.ref)
        self.max_rows = int_option(options, "max-rows-per-trigger", table)
        consumer_id = options.get("consumer-id")
        self.consumer_id = None if consumer_id is None else check_consumer_id(table, consumer_id)
        self._recorded: dict[str, Any] | None = None
        self._recorded_at = 0.0
        if self.max_rows and not ADMISSION_CONTROL:
            warnings.warn(f"table {table!r}: option 'max-rows-per-trigger' needs PySpark >= 4.2 (admission control "
                          "for Python stream readers); on this PySpark every trigger reads all available changes",
                          RuntimeWarning, stacklevel=2)
        self._target: dict[str, Any] | None = None
        self._seen: dict[str, Any] | None = None   # the last offset given (PySpark 4.1 passes latestOffset no start)
        self.stream_schema = schema

    # -- offsets ----------------------------------------------------------------------------------
    def initialOffset(self) -> dict[str, Any]:
        self._seen = self._initial_offset()
        return self._seen

    def _initial_offset(self) -> dict[str, Any]:
        handle = self.ref.handle()
        snapshots = handle.store.snapshots
        latest = snapshots.latest()
        consumer = ConsumerManager(handle.store).get(self.consumer_id) if self.consumer_id else None
        if consumer is not None and handle.log is None:
            return {"base": None, "snapshot": consumer.next_snapshot_id - 1}
        if consumer is not None and handle.log is not None:
            return {"base": None, "log": _json({p: consumer.log_offsets.get(p, 0)
                                                for p in range(handle.log.options.partitions)})}
        if handle.log is None:
            if self.scan == "full":
                return {"base": latest.id if latest else None, "snapshot": latest.id if latest else 0}
            if self.scan == "latest":
                return {"base": None, "snapshot": latest.id if latest else 0}
            assert self.timestamp_ms is not None
            before = [s.id for s in snapshots.snapshots() if s.time_millis < self.timestamp_ms]
            return {"base": None, "snapshot": max(before, default=0)}
        reader = handle.log.new_reader()
        partitions = handle.log.options.partitions
        if self.scan == "full":
            handover = handover_snapshot(handle.store)   # before any snapshot whose log is still being produced
            stored = handover.log_offsets if handover else {}
            log = {p: stored.get(p, 0) for p in range(partitions)}
            return {"base": handover.id if handover else None, "log": _json(log)}
        if self.scan == "latest":
            return {"base": None, "log": _json(reader.start_at_end())}
        assert self.timestamp_ms is not None
        start = reader.start_at_timestamp(self.timestamp_ms)
        if self.normalize:  # a start inside a commit reads that whole commit
            start = {p: commit_start(handle.store, p, o) for p, o in start.items()}
        return {"base": None, "log": _json(start)}

    def _end(self) -> dict[str, Any]:
        handle = self.ref.handle()
        if handle.log is None:
            return {"snapshot": handle.store.snapshots.latest_id() or 0}
        return {"log": _json(handle.log.new_reader().start_at_end())}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._end()

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxRows(self.max_rows) if self.max_rows else ReadAllAvailable()

    def latestOffset(self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None) -> dict[str, Any]:
        """PySpark >= 4.2 passes the batch's start and read limit; 4.1 passes neither: then everything there is,
        from this reader's last answer, its initial offset or (restarted from a checkpoint) the offset Spark told
        `partitions`."""
        if start is not None:   # the end of a committed micro-batch: also the last one of an AvailableNow run,
            self._record(start)   # whose commit(end) Spark calls only when it plans another batch
        end = self._target if self._target is not None else self._end()
        if start is None:
            seen = self._seen if self._seen is not None and "snapshot" in self._seen and "snapshot" in end else None
            self._seen = {"base": None, **end} if seen is None else self._latest_offset(seen, end, None)
            return self._seen
        return self._latest_offset(start, end, limit)

    def _latest_offset(self, start: dict[str, Any], end: dict[str, Any], limit: ReadLimit | None) -> dict[str, Any]:
        budget = limit.max_rows if limit is not None and isinstance(limit, ReadMaxRows) else None
        if "snapshot" in start:
            first, last = int(start["snapshot"]), int(end["snapshot"])
            store = self.ref.handle().store if last > first else None
            if store is not None:
                last = _last_with_changes(store, first, last)
            if store is not None and budget is not None and last > first + 1:  # snapshots are whole: one at least
                rows, upto = 0, first
                for sid in range(first + 1, last + 1):
                    if store.snapshots.exists(sid):
                        rows += abs(store.snapshots.get(sid).delta_record_count)
                    upto = sid
                    if rows >= budget:
                        break
                last = upto
            return {"base": None, "snapshot": max(first, last)}
        begin, stop = _offsets(start["log"]), _offsets(end["log"])
        out: dict[int, int] = {}
        for p, o in sorted(begin.items()):
            target = max(o, stop.get(p, o))
            if budget is not None:
                take = min(budget, target - o)
                if self.normalize and take:  # whole commits only
                    take = commit_end(self.ref.handle().store, p, o, o + take, target) - o
                budget = max(0, budget - take)
                target = o + take
            out[p] = target
        return {"base": None, "log": _json(out)}

    # -- planning and reading ---------------------------------------------------------------------
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        if self._seen is None:   # PySpark 4.1 restarting from a checkpoint tells its offset this way (start = end)
            self._seen = dict(end)
        parts: list[InputPartition] = []
        base = start.get("base")
        if base is not None:
            parts.append(ChangesPartition("base", base=int(base)))
        if "snapshot" in start:
            store = self.ref.handle().store
            for sid in range(int(start["snapshot"]) + 1, int(end["snapshot"]) + 1):
                if store.snapshots.exists(sid):
                    parts.append(ChangesPartition("snapshot", parent=sid - 1, snapshot=sid, stored=self.stored))
            return parts
        begin, stop = _offsets(start["log"]), _offsets(end["log"])
        ranges = tuple((p, o) for p, o in sorted(begin.items()) if stop.get(p, o) > o)
        if self.normalize:
            parts += [ChangesPartition("commits", log_start=((p, o),), log_end=((p, stop[p]),)) for p, o in ranges]
        elif ranges:
            parts.append(ChangesPartition("log", log_start=ranges,
                                          log_end=tuple((p, stop[p]) for p, _ in ranges)))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, ChangesPartition)
        fault_point("stream-read")
        schema = stream_schema(self.ref, self.stream_schema)
        handle = self.ref.handle()
        if partition.kind == "base":
            from tablestore.table import Table

            for batch in Table(handle).read_batches(snapshot_id=partition.base):
                yield _conform(pa.Table.from_batches([batch]).add_column(
                    0, ROW_KIND_COLUMN, insert_kinds(batch.num_rows)), schema)
        elif partition.kind == "snapshot":
            assert partition.snapshot is not None
            yield from _snapshot_batches(handle.store, partition.snapshot, schema, partition.stored)
        elif partition.kind == "commits":
            assert handle.log is not None
            (bucket, start), = partition.log_start
            (_, end), = partition.log_end
            source = ChangeSource(handle.identifier, handle.schema.arrow_schema, handle.schema.primary_keys,
                                  handle.store, handle.log)
            for changes in range_changes(source, bucket, start, end):
                yield _conform(changes, schema)
        else:
            assert handle.log is not None
            for batch in handle.log.new_reader().read_range(dict(partition.log_start), dict(partition.log_end)):
                yield _conform(pa.Table.from_batches([batch]), schema)

    def commit(self, end: dict[str, Any]) -> None:
        """Record the consumer's progress (`consumer-id`): everything up to `end` is processed."""
        self._record(end)

    def _record(self, end: dict[str, Any]) -> None:
        """Write the consumer when its position moved, or to refresh its update time (at most every
        _CONSUMER_REFRESH_S while it stands still)."""
        if self.consumer_id is None or end.get("base") is not None:   # a start whose snapshot is still to read
            return
        position = {"snapshot": end["snapshot"]} if "snapshot" in end else {"log": end["log"]}
        if position == self._recorded and time.monotonic() - self._recorded_at < _CONSUMER_REFRESH_S:
            return
        consumers = ConsumerManager(self.ref.handle().store)
        if "snapshot" in end:
            consumers.record(self.consumer_id, {}, next_snapshot=int(end["snapshot"]) + 1)
        else:
            consumers.record(self.consumer_id, _offsets(end["log"]))
        self._recorded, self._recorded_at = position, time.monotonic()


def stream_schema(ref: TableRef, started: "StructType") -> pa.Schema:
    """The batches' schema: the columns the stream started with (Spark fixes a stream's schema at its start),
    in the table's types unless a type was widened since, then in the started type. Columns added since are
    left out until the query restarts; a column the table no longer has is an error naming it."""
    from tablestore.spark.types import read_schema, spark_type

    table = changes_schema(ref)
    wanted = read_schema(started)
    fields = []
    for field in started:
        if table.get_field_index(field.name) < 0:
            raise DataSourceOptionError(
                f"table {ref.identifier!r}: column {field.name!r} of this stream is no longer in the table; "
                "restart the query from a new checkpoint")
        now = table.field(field.name)
        same = field.name == ROW_KIND_COLUMN or spark_type(now.type, now.name) == field.dataType
        fields.append(now if same else wanted.field(field.name))
    return pa.schema(fields)


def _normalize(options: Mapping[str, str], ref: TableRef) -> bool:
    """Whether the log is read as the changelog of its commits: `changelog.normalize` (the read's option, else
    the table's) on a primary-key table with a log."""
    handle = ref.handle()
    return _wanted_normalize(options, ref) and handle.schema.has_primary_key and handle.log is not None


def _stored_records(options: Mapping[str, str], ref: TableRef) -> bool:
    """Whether a table without a log streams each snapshot's records as written (snapshot_changes.snapshot_records)
    rather than its changelog: `changelog.normalize` = false on a primary-key table that keeps each key's newest
    row (another merge engine's records are not rows: its changelog then)."""
    handle = ref.handle()
    return (not _wanted_normalize(options, ref) and handle.log is None and handle.schema.has_primary_key
            and handle.store.options.merge_engine.is_default)


def _wanted_normalize(options: Mapping[str, str], ref: TableRef) -> bool:
    key = catalog.CHANGELOG_NORMALIZE.key
    try:
        wanted = (catalog.CHANGELOG_NORMALIZE.parse(options[key]) if key in options
                  else ref.handle().options.get(catalog.CHANGELOG_NORMALIZE))
    except catalog.InvalidOptionError as e:
        raise DataSourceOptionError(f"table {ref.identifier!r}: {e}") from None
    return bool(wanted)


def _json(offsets: dict[int, int]) -> dict[str, int]:
    return {str(p): int(max(o, 0)) for p, o in offsets.items()}


def _offsets(raw: dict[str, int]) -> dict[int, int]:
    return {int(p): int(o) for p, o in raw.items()}


def _last_with_changes(store: FileStore, first: int, last: int) -> int:
    """The newest snapshot after `first` up to `last` that may hold changes; `first` when every one is a compaction
    (which changes no row, `snapshot_changes`): the stream then makes no micro-batch of its own for a compaction
    (an empty one, with its checkpoint writes and its sink's call). A compaction before a later change is read
    with that change's batch, as before. A snapshot gone (expired) counts as one with changes: its batch reads
    nothing."""
    for sid in range(last, first, -1):
        if not store.snapshots.exists(sid) or store.snapshots.get(sid).commit_kind != CommitKind.COMPACT:
            return sid
    return first


def _snapshot_batches(store: FileStore, snapshot_id: int, schema: pa.Schema, stored: bool
                      ) -> Iterator[pa.RecordBatch]:
    """The changes of snapshot `snapshot_id` from its parent (the empty table if that has expired), or its records
    as written when `stored`, as batches of `schema`: a log-less table's micro-batch, one snapshot at a time."""
    parent = store.snapshots.get(snapshot_id - 1) if store.snapshots.exists(snapshot_id - 1) else None
    changes = snapshot_records if stored else snapshot_changes
    for table in changes(store, parent, store.snapshots.get(snapshot_id)):
        yield _conform(table, schema)


# A micro-batch of a log-less table with at most this many records in its snapshots is computed by the catalog
# service on the driver and read by the JVM (`changes_in_service`); a larger one by Python readers on the executors.
CHANGES_IN_SERVICE_RECORDS = 100_000


def changes_in_service(args: Mapping[str, Any]) -> dict[str, int] | None:
    """The catalog service's `stream_changes`: the micro-batch of a table without a log from snapshot "start"
    (exclusive) to "end", computed here (`_snapshot_batches`, what the Python reader's tasks run) and written as an
    Arrow IPC file to "path", for the JVM's stream to hand its tasks (tablestore.spark.jvm.catalog.ServiceChanges):
    no Python worker, whose start and hand-over cost each micro-batch 0.1-0.2 s (PySpark 4.1). `args`: also the
    read's "options" (the table's identity injected) and the stream's "schema" (Spark's JSON). {"rows": n}; None when
    the batch is not one for the service (a table with a log, or more than CHANGES_IN_SERVICE_RECORDS records in the
    data snapshots: the Python reader then reads it on the executors, as before)."""
    from pyspark.sql.types import StructType

    options = {str(k): str(v) for k, v in dict(args["options"]).items()}
    ref = table_ref(options)
    handle = ref.handle()
    if handle.log is not None:
        return None
    store = handle.store
    start, end = int(args["start"]), int(args["end"])
    snapshots = [store.snapshots.get(sid) for sid in range(start + 1, end + 1) if store.snapshots.exists(sid)]
    if sum(abs(s.delta_record_count) for s in snapshots if s.commit_kind != CommitKind.COMPACT) > \
            CHANGES_IN_SERVICE_RECORDS:
        return None
    schema = stream_schema(ref, StructType.fromJson(json.loads(str(args["schema"]))))
    stored = _stored_records(options, ref)
    rows = 0
    with pa.OSFile(str(args["path"]), "wb") as sink, pa.ipc.new_file(sink, schema) as out:
        for snapshot in snapshots:
            for batch in _snapshot_batches(store, snapshot.id, schema, stored):
                out.write_batch(batch)
                rows += batch.num_rows
    return {"rows": rows}


def _conform(table: pa.Table, schema: pa.Schema) -> pa.RecordBatch:
    table = table.select(schema.names).cast(schema)
    return table.combine_chunks().to_batches()[0] if table.num_rows else pa.RecordBatch.from_pylist([], schema)


def read_changes(spark: "SparkSession", table: str, **options: Any) -> "DataFrame":
    """`spark.readStream.format("managed")` of `table`'s changes: `_row_kind` + the table's columns. Options as
    keyword arguments with `_` for `-`/`.` where needed, or their keys: `scan`, `scan.timestamp-ms`,
    `max-rows-per-trigger`, `changelog.normalize`, `consumer-id`, `warehouse`."""
    from tablestore.spark.types import spark_schema

    opts = {k: str(v) for k, v in options.items()}
    ref = table_ref({"path": table} | opts)
    return spark.readStream.format("managed").schema(spark_schema(changes_schema(ref))).options(**opts).load(table)


freeze_imports()   # a PySpark worker's collections after each task skip what is loaded by now (pyworker)
