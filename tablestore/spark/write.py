"""Batch writes of the `managed` data source: write on executors, commit ONE snapshot on the driver.

Protocol of one write job:
1. `ManagedWriter.__init__` (driver-side worker) fixes the base snapshot the job writes on top of, the commit
   scope (append / overwrite all / overwrite the partitions written) and whether the log gets the rows.
2. `write` (one task per input partition, on executors) applies the task's Arrow batches in order to a file-store
   writer whose sequence numbers start at `base + 1 + task * SEQUENCE_STRIDE` per bucket (see below), flushes
   sorted runs, and returns their commit messages (files invisible until 4).
2'. Where it applies, the tasks are the JVM twin of 2 (tablestore/spark/jvm_write.py: a batch write Spark
   clusters one bucket per task, of a table with a one-column integer primary key, ...): `__init__` writes the
   JVM's plan (the base snapshot's sequence numbers per bucket, ...) to the file the write's `__jvm-write-plan`
   option names; each JVM task returns a JvmTaskCommit naming its files, whose metadata `commit` builds from the
   files themselves (filestore.adopt_data_file). The write option `jvm-writer=false` keeps 2.
3. A failed task or job: `abort` deletes the files the finished tasks wrote.
4. `commit` hands every task's files to a write session (tablestore.writer.TableWriter.commit_prepared, a fresh
   commit user, identifier 1): it produces their changes to the log (unless change-tracking is off or this is an
   overwrite), publishes one snapshot, commits the log, then compacts as every write does. A concurrent writer
   that committed to the same buckets since the base makes it fail with SequenceConflictError (re-run the job);
   an overwrite that lost files to a concurrent one, with CommitConflictError.
A write whose rows were computed from a snapshot (SQL MERGE INTO and UPDATE: catalog/RowLevelRewrite.java) names it
in `PLANNED_SNAPSHOT_OPTION`: the job writes on top of that snapshot instead of the latest, and its commit fails with
ConcurrentUpdateError (nothing committed, a re-run is safe) if a data commit since then touched a bucket it writes.
Streaming (`ManagedStreamWriter`): each micro-batch is one job as above, on the latest snapshot when its tasks
start, committed as (commit user `spark-stream-<query id>`, identifier batch id + 1): see tablestore/spark/stream_write.py.

Rows of one primary key arriving through several input partitions: Spark gives no order between tasks, so the
job orders them by task: each task's sequence numbers start SEQUENCE_STRIDE above the previous task's, so rows
of a higher-numbered input partition win over rows of lower ones; within a task, input order wins. No two tasks
give a key tied sequence numbers. For a deterministic result when one key has several rows, repartition by the
primary key first (`df.repartition(*pk)`): all rows of a key then meet in one task, in their input order.
"""
from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator, Literal, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from filestore import BucketMismatchError, CommitMessage, FileStoreWrite, Overwrite, Partition
from logstore import ROW_KIND_COLUMN
from tablestore.convert import checked_row_kinds, value_kinds
from tablestore.errors import TableStoreError
from tablestore.spark.source_options import DataSourceOptionError, TableRef, int_option, table_ref
from tablestore.spark.jvm_write import (PLAN_OPTION, JvmTaskCommit, commit_messages, data_file_paths, write_plan,
                                       write_plan_file)
from tablestore.faults import fault_point
from tablestore.log_publish import pending_plans
from tablestore.spark.log_publish import PLAN_OPTION as LOG_PLAN_OPTION
from tablestore.spark.log_publish import write_plans
from tablestore.spark.s3a import jvm_marked_s3a
from tablestore.write_target import WriteTarget
from tablestore.writer import TableWriter
from tablestore.spark.pyworker import freeze_imports

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from filestore import FileStore, LiveFiles, Snapshot

SEQUENCE_STRIDE = 1 << 32
"""Sequence numbers a task may use per bucket and job (4.3e9 rows); the whole int64 range lasts 2**31 tasks."""
OVERWRITE_MODES = ("static", "dynamic", "filter")
"""`overwrite-mode` of an overwrite: the whole table; the partitions written; the partitions `overwrite-predicate`
(Spark's predicates as JSON, tablestore.spark.predicates) selects when the write commits."""
WRITE_CHUNK_ROWS = 256 * 1024
"""Rows a task gathers from Spark's batches before handing them to the file store's writer (in input order)."""
TASK_BUCKET_OPTION = "__task-bucket"
"""Set to `any` by a write Spark does not shuffle by bucket (`sink.shuffle-by-bucket` = false, Unshuffled.java):
each JVM task writes every bucket of its rows, so the JVM write plan is made for it. Set to `partition` by the
writes Spark clusters (BucketClustering.java, the same constant: SQL INSERT and
`df.write.format("managed")`) when Spark clusters the rows so that batch write task p receives exactly the rows of
bucket p (a table without partition columns whose every bucket has its own task: BucketSlotFunction). The task
then skips hashing its rows (the JVM twin of the bucket function already did, differential-tested); a sample of
each chunk is still hashed, and a row of another bucket fails the task (SparkWriteError) rather than landing in
the wrong bucket (FileStoreWrite's `bucket=`). Streaming writes ignore it."""
PLANNED_SNAPSHOT_OPTION = "__planned-snapshot-id"
"""Write option set by the SQL MERGE INTO / UPDATE rewrite (catalog/RowLevelRewrite.java, the same constant): the
snapshot the rows were read from (0: the table had none), which the write is based on and checked against."""


class SparkWriteError(TableStoreError):
    """A Spark write to a managed table cannot proceed; names the table."""


@dataclass(frozen=True)
class TaskCommit(WriterCommitMessage):
    """What one write task hands the driver: its file-store commit messages."""

    task: int
    messages: tuple[CommitMessage, ...]


class _TaskSequences(dict[tuple[Partition, int], int]):
    """Highest committed sequence number per bucket, shifted up by this task's stride: FileStoreWrite numbers a
    bucket's rows from `get(where, -1) + 1`, for buckets it has never seen too."""

    def __init__(self, committed: dict[tuple[Partition, int], int], offset: int) -> None:
        super().__init__(committed)
        self.offset = offset

    def get(self, key: tuple[Partition, int], default: int | None = None) -> int:  # type: ignore[override]
        return super().get(key, -1) + self.offset


def _change_tracking(options: dict[str, str], table: str) -> bool | None:
    """The write's own `change-tracking` option (None: the table's, decided by WriteTarget.of)."""
    from catalog import CHANGE_TRACKING

    raw = options.get(CHANGE_TRACKING.key)
    try:
        return None if raw is None else bool(CHANGE_TRACKING.parse(str(raw)))
    except Exception as e:   # the option type's own error names the problem
        raise DataSourceOptionError(f"table {table!r}: option {CHANGE_TRACKING.key!r}: {e}") from None


TXN_APP_ID, TXN_VERSION = "txnAppId", "txnVersion"
"""Write options of an idempotent batch write (Delta's names): the writes of one application id commit as one writer,
each version at most once; a version already committed is skipped (a `foreachBatch` function that Spark runs again
for a micro-batch after a restart writes it once)."""


def txn_identity(options: dict[str, str], table: str) -> tuple[str, int] | None:
    """(application id, version) of an idempotent write, None for a plain one."""
    keys = {str(k).lower(): v for k, v in options.items()}   # Spark hands the options over lowercased
    app, version = keys.get(TXN_APP_ID.lower()), keys.get(TXN_VERSION.lower())
    if app is None and version is None:
        return None
    if not app or version is None or not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", app):
        raise DataSourceOptionError(f"table {table!r}: an idempotent write needs both {TXN_APP_ID} (letters, digits, "
                                    f"'_', '.', '-': at most 64) and {TXN_VERSION}, got {app!r} and {version!r}")
    number = int_option(keys, TXN_VERSION.lower(), table)
    if number is None or number < 1:
        raise DataSourceOptionError(f"table {table!r}: {TXN_VERSION} must be a positive integer, got {version!r}")
    return app, number


class ManagedWriter(DataSourceArrowWriter):
    def __init__(self, options: dict[str, str], schema: "StructType", overwrite: bool) -> None:
        self.ref: TableRef = table_ref(options)
        handle = self.ref.handle()
        table = self.ref.identifier
        mode = options.get("overwrite-mode", "static").lower()
        if mode not in OVERWRITE_MODES:
            raise DataSourceOptionError(f"table {table!r}: overwrite-mode must be one of {OVERWRITE_MODES}, got {mode!r}")
        self.scope: Literal["all", "dynamic", "filter"] | None = None
        self.predicate: str | None = None
        if overwrite and mode == "filter":
            self.scope, self.predicate = "filter", options.get("overwrite-predicate")
            if self.predicate is None:
                raise DataSourceOptionError(f"table {table!r}: overwrite-mode 'filter' needs overwrite-predicate")
            self._filtered(handle.store, handle.store.snapshots.latest())   # a bad predicate fails the planning
        elif overwrite:
            self.scope = "dynamic" if mode == "dynamic" and handle.schema.partition_keys else "all"
        self.change_tracking = WriteTarget.of(handle, _change_tracking(options, table)).change_tracking
        # set by the JVM: the executors produce the log after the commit (tablestore/spark/log_publish.py)
        self.log_plan_file = options.get(LOG_PLAN_OPTION) if handle.log is not None else None
        # what a write session opened on this table depends on (see stream_write._SESSIONS)
        self.table_state = (self.ref, handle.store.paths.root, tuple(sorted(dict(handle.options.raw).items())),
                            handle.store.schema.id, handle.log.options.topic if handle.log is not None else None)
        planned = int_option(options, PLANNED_SNAPSHOT_OPTION, table)
        self.planned_on: int | None = planned
        if planned is not None and overwrite:
            raise DataSourceOptionError(f"table {table!r}: {PLANNED_SNAPSHOT_OPTION} is for appends only")
        base = handle.store.snapshots.latest() if not planned else handle.store.snapshots.get(planned)
        if planned == 0:
            base = None
        self.base_snapshot_id = None if base is None else base.id
        # the highest sequence number per bucket of the base, computed once here and shipped to every task with the
        # writer (None: each micro-batch's tasks read the latest snapshot's, ManagedStreamWriter)
        self.base_sequences = self._driver_sequences(handle.store, base)
        self.plan_schema_id = handle.store.schema.id   # the JVM tasks write the columns of this schema
        self.txn = txn_identity(options, table)
        self.commit_user = f"spark-txn-{self.txn[0]}" if self.txn is not None else f"spark-{uuid.uuid4()}"
        names = [f.name for f in schema]
        self.has_row_kind = ROW_KIND_COLUMN in names
        self.bucket_per_task = options.get(TASK_BUCKET_OPTION) == "partition" and self._clustered_by_spark()
        unshuffled = options.get(TASK_BUCKET_OPTION) == "any"
        plan_file = options.get(PLAN_OPTION)
        if plan_file is not None and self._clustered_by_spark():
            if self.has_row_kind:
                plan = {"usable": False, "reason": "a changelog (_row_kind) write"}
            elif not self.bucket_per_task and not unshuffled:
                plan = {"usable": False, "reason": "Spark does not cluster the rows one bucket per task"}
            else:
                sequences = self.base_sequences if self.base_sequences is not None else {}
                plan = write_plan(handle.store, sequences, table, SEQUENCE_STRIDE,
                                  jvm_s3a=jvm_marked_s3a(options),
                                  catalog_options=self.ref.catalog_options)
            write_plan_file(plan_file, plan)

    def _clustered_by_spark(self) -> bool:
        """Whether Spark applies the write's distribution (batch writes; ManagedStreamWriter says no)."""
        return True

    def _driver_sequences(self, store: "FileStore",
                          base: "Snapshot | None") -> dict[tuple[Partition, int], int] | None:
        """The highest sequence number per bucket of `base`, the snapshot a batch write is planned on."""
        return store.live_files(base).max_sequence_numbers()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        from pyspark import TaskContext

        from tablestore.spark.profiling import profiled

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        with profiled(f"write-task{task}"):
            return self._write_task(task, iterator)

    def _write_task(self, task: int, iterator: Iterator[pa.RecordBatch]) -> TaskCommit:
        handle = self.ref.handle()
        store = handle.store
        committed = self.base_sequences
        base: "LiveFiles | Callable[[], LiveFiles]" = lambda: store.live_files(self._base(store))  # noqa: E731
        if committed is None:
            base = store.live_files(self._base(store))
            committed = base.max_sequence_numbers()
        sequences = _TaskSequences(committed, task * SEQUENCE_STRIDE)
        one_bucket = self.bucket_per_task and task < store.options.bucket
        writer = FileStoreWrite(store.context, sequences, bucket=task if one_bucket else None, base=base)
        try:
            # Spark hands 10k-row batches; the file store's write costs per call, so apply them in chunks
            pending: list[pa.RecordBatch] = []
            rows = 0
            for batch in iterator:
                if batch.num_rows:
                    pending.append(batch)
                    rows += batch.num_rows
                if rows >= WRITE_CHUNK_ROWS:
                    self._apply(writer, pending)
                    pending, rows = [], 0
            self._apply(writer, pending)
            messages = tuple(writer.prepare_commit())
        except BucketMismatchError as e:
            raise SparkWriteError(f"table {self.ref.identifier!r}: write task {task} was given rows of bucket "
                                  f"{e.found}: Spark's clustering by the table's bucket does not match the file "
                                  "store's bucket function") from e
        except BaseException:
            # files this task already flushed stay unreferenced: `remove_orphan_files` deletes them
            raise
        for m in messages:
            limit = committed.get((m.partition, m.bucket), -1) + (task + 1) * SEQUENCE_STRIDE
            if any(f.max_sequence_number > limit for f in m.added):
                _delete(store, messages)
                raise SparkWriteError(f"table {self.ref.identifier!r}: task {task} wrote more than "
                                      f"{SEQUENCE_STRIDE} rows into bucket {m.bucket}: use more input partitions")
        return self._task_commit(task, messages)

    def _base(self, store: "FileStore") -> "Snapshot | None":
        """The snapshot the tasks write on top of when the driver did not hand them its sequences."""
        return None if self.base_snapshot_id is None else store.snapshots.get(self.base_snapshot_id)

    def _task_commit(self, task: int, messages: tuple[CommitMessage, ...]) -> TaskCommit:
        return TaskCommit(task, messages)

    def _apply(self, writer: FileStoreWrite, batches: list[pa.RecordBatch]) -> None:
        if not batches:
            return
        data = pa.Table.from_batches(batches)
        kinds = None
        if self.has_row_kind:
            kinds = value_kinds(checked_row_kinds(self.ref.identifier, data))
            data = data.drop_columns([ROW_KIND_COLUMN])
        writer.write(data, kinds)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        everything = [cm for m in messages if isinstance(m, TaskCommit) for cm in m.messages]
        jvm = [m for m in messages if isinstance(m, JvmTaskCommit)]
        if jvm:
            store = self.ref.handle().store   # the JVM files are of the plan's schema, whatever the table's is now
            everything += commit_messages(store, jvm, store.schema_of(self.plan_schema_id))
        # Spark calls `abort` when this raises: it deletes the files unless the snapshot was published
        scope: Overwrite = self.scope if self.scope != "filter" else None
        if self.scope == "filter":
            store = self.ref.handle().store
            scope = self._filtered(store, store.snapshots.latest())
        if self.txn is None:
            with self.session(self.commit_user, new_user=True) as session:
                self.commit_session(session, everything, 1, scope)
            return
        app, version = self.txn   # an idempotent write: a version already in deletes these files (commit_prepared)
        with self.session(self.commit_user, f"tablestore-{self.ref.identifier}-txn-{app}") as session:
            self.commit_session(session, everything, version, scope)

    def commit_session(self, session: TableWriter, messages: list[CommitMessage], identifier: int,
                       overwrite: Overwrite = None) -> None:
        """The commit of the driver's write session; when the JVM runs the executors' log job after it, the
        snapshot's log is left pending and the plans of the table's pending logs go to the JVM's file."""
        deferred = self.log_plan_file is not None and self.change_tracking
        session.commit_prepared(messages, identifier, overwrite=overwrite, log=self.change_tracking,
                                defer_log=deferred, planned_on=self.planned_on)
        if deferred:
            assert self.log_plan_file is not None
            write_plans(self.log_plan_file, self.ref, pending_plans(self.ref.handle().store, session.commit_user))
            fault_point("log-plans-written")

    def _filtered(self, store: "FileStore", snapshot: "Snapshot | None") -> frozenset[Partition]:
        """The live partitions of `snapshot` that overwrite-predicate selects (tablestore.spark.predicates)."""
        from tablestore.spark.predicates import matching_partitions

        assert self.predicate is not None
        live = {e.partition for e in store.live_entries(snapshot).values()} if snapshot is not None else set()
        schema = store.schema
        return matching_partitions(self.ref.identifier, self.predicate, schema.arrow_schema, schema.partition_keys,
                                   live)

    def session(self, commit_user: str, transactional_id: str | None = None, *,
                new_user: bool = False) -> TableWriter:
        """The driver's write session for a commit (the one owner of commit user, identifiers and compaction)."""
        handle = self.ref.handle()
        return TableWriter(WriteTarget.of(handle, self.change_tracking), commit_user=commit_user,
                           transactional_id=transactional_id, new_user=new_user)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:  # type: ignore[override]
        store = self.ref.handle().store
        if store.new_commit(self.commit_user).find_committed(self.txn[1] if self.txn else 1) is not None:
            return   # the commit published its snapshot before failing: the files are the table's now
        _delete(store, [cm for m in messages if isinstance(m, TaskCommit) for cm in m.messages])
        for path in data_file_paths(store, [m for m in messages if isinstance(m, JvmTaskCommit)]):
            store.io.delete(path)


def _delete(store: "FileStore", messages: Sequence[CommitMessage]) -> None:
    for m in messages:
        for f in m.added:
            store.io.delete(store.data_file_path(m.partition, m.bucket, f.file_name))


freeze_imports()   # a PySpark worker's collections after each task skip what is loaded by now (pyworker)
