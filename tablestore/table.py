"""The Python API: `tablestore.Catalog` and `Table`, usable without Spark or Kafka.

Change kinds on the wire (+I/-U/+U/-D, owned by logstore) are translated to file-store value kinds here and
only here: +I and +U add a row, -U and -D delete it.
"""
from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator, Literal, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

import catalog as _catalog
from filestore import (
    CommitMessage, CommitRetriesExhaustedError, RetryBudget, SequenceConflictError, Snapshot, delta_version,
)
from logstore import ROW_KIND_COLUMN
from tablestore.changes import read_changes
from tablestore.convert import Data, to_arrow
from tablestore.describe import file_detail, iso_time, log_detail, partition_selector, partition_spec
from tablestore.merge import MergeIo, TableMerger
from tablestore.merge_plan import MergeTarget
from tablestore.overwrite import overwrite_scope
from tablestore.errors import TableStoreError
from tablestore.system_tables import system_table
from tablestore.table_maintenance import TableMaintenance
from tablestore.write_target import WriteTarget
from tablestore.writer import TableWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SnapshotInfo:
    """What `Table.snapshots()` describes of one snapshot. Also readable like a dict: info["id"]."""

    id: int
    kind: str
    time_millis: int
    total_record_count: int
    delta_record_count: int
    commit_user: str
    commit_identifier: int
    schema_id: int
    log_offsets: Mapping[int, int]
    delta_version: int | None = None
    """The table's Delta Lake version of this snapshot (`metadata.delta.enabled`), else None."""
    commit_duration_ms: int | None = None
    """How long its commit took, from the writer's call to the snapshot (None: written before it was recorded)."""

    @property
    def time(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.time_millis / 1000, tz=dt.timezone.utc)

    def __getitem__(self, key: str) -> object:
        return getattr(self, key)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @staticmethod
    def of(s: Snapshot, *, delta: bool = False) -> "SnapshotInfo":
        return SnapshotInfo(s.id, s.commit_kind.value, s.time_millis, s.total_record_count, s.delta_record_count,
                            s.commit_user, s.commit_identifier, s.schema_id, dict(s.log_offsets),
                            delta_version(s.id) if delta else None, s.commit_duration_ms)


@dataclass(frozen=True)
class DeleteResult:
    """What `Table.delete` did: the snapshot it committed (None: no row matched) and how many rows it deleted."""

    snapshot_id: int | None
    deleted_rows: int


class Table(TableMaintenance):
    """A managed table. Obtain it from `Catalog.create_table` or `Catalog.get_table`."""

    def __init__(self, handle: _catalog.CatalogTable, *, catalog: _catalog.Catalog | None = None) -> None:
        """`catalog`: the catalog the table was loaded from (what `add_column` and `alter_column_type` change)."""
        self._handle = handle
        self._store = handle.store
        self._catalog = catalog
        self._session: TableWriter | None = None  # the handle's write session: `write()` and `compact()`

    @property
    def name(self) -> str:
        return self._handle.identifier

    @property
    def schema(self) -> pa.Schema:
        return self._handle.schema.arrow_schema

    @property
    def primary_key(self) -> list[str]:
        return list(self._handle.schema.primary_keys)

    @property
    def partition_by(self) -> list[str]:
        return list(self._handle.schema.partition_keys)

    @property
    def options(self) -> dict[str, str]:
        return dict(self._handle.options.raw)

    @property
    def path(self) -> str:
        return self._handle.path

    # -- schema evolution ----------------------------------------------------------------------
    def add_column(self, name: str, type: pa.DataType) -> None:
        """Add a nullable column `name` of `type` at the end of the table's schema (rows written before read it as
        null). Adding a column that exists with this type does nothing; anything else refused is a
        SchemaEvolutionError (see `Catalog.alter_table`). This object sees the new schema at once."""
        self._evolve(lambda cat: cat.alter_table(self.name, add_columns=[pa.field(name, type)]))

    def alter_column_type(self, name: str, type: pa.DataType) -> None:
        """Widen column `name` to `type` (int8 -> int16 -> int32 -> int64, float32 -> float64, decimal(p, s) ->
        decimal(p', s) with p' > p; never a primary-key or partition column): rows written before read cast. A
        refused change is a SchemaEvolutionError naming the table, the column and both types."""
        self._evolve(lambda cat: cat.alter_table(self.name, alter_column_types={name: type}))

    def rename_column(self, old: str, new: str) -> None:
        """Rename column `old` to `new`: rows written before read their values under the new name. Never a
        primary-key, partition or bucket-key column; a refused change is a SchemaEvolutionError (see
        `Catalog.rename_column`). This object sees the new schema at once."""
        self._evolve(lambda cat: cat.rename_column(self.name, old, new))

    def drop_column(self, *names: str) -> None:
        """Drop columns `names`: their data is never read again, even by a column added later under the same
        name. Never a primary-key, partition or bucket-key column; a refused change is a SchemaEvolutionError (see
        `Catalog.drop_column`). This object sees the new schema at once."""
        self._evolve(lambda cat: cat.drop_column(self.name, *names))

    def _evolve(self, change: Callable[[_catalog.Catalog], _catalog.CatalogTable]) -> None:
        if self._catalog is None:
            raise TableStoreError(f"table {self.name!r}: this handle was not loaded from a Catalog; change its "
                                  f"schema with Catalog.alter_table")
        self._reload(change(self._catalog))

    def _reload(self, handle: _catalog.CatalogTable) -> None:
        """Point this object at `handle` (the table loaded again). Its write session is closed: the next write
        opens one on the new schema and log store. Sessions handed out by `log_writer()` keep theirs: their files
        carry the schema they were written under and read back under the new one."""
        self.close()
        self._session = None
        self._handle = handle
        self._store = handle.store

    # -- writing -------------------------------------------------------------------------------
    def write(
        self, data: Data, overwrite: bool | Mapping[str, Any] | Literal["dynamic"] = False
    ) -> int | None:
        """Write `data` and commit one snapshot (then compact, see `log_writer`); returns its id, or None when
        nothing was committed: `data` has no rows, or (on a table without a primary key) its changes cancel out,
        e.g. +I then -U of one row; and `overwrite` is False.

        `overwrite`: False appends; True replaces the whole table; a mapping {partition column: value} replaces that
        static partition (every row must belong to it); "dynamic" replaces only the partitions present in `data`.
        A string column `_row_kind` (+I, -U, +U, -D) makes `data` a changelog. Within one write rows apply in input
        order: a later row for the same key wins.
        """
        arrow = to_arrow(data)
        scope = overwrite_scope(self.name, self.schema, self.partition_by, overwrite, arrow)
        session = self._write_session()
        budget = RetryBudget(self._store.options)
        while True:
            started = time.monotonic()
            try:
                session._write(arrow, overwrite=scope)
                return session.commit()
            except SequenceConflictError:
                # another writer committed to the same buckets since this one started: re-plan on its snapshot,
                # after a random wait (see filestore.RetryBudget) so the writers stop colliding
                session.abort()
                if not budget.retry(time.monotonic() - started):
                    session.release()
                    raise
                log.info("table %s: concurrent write to the same buckets, retry %s", self.name, budget.retries)
            except BaseException:
                session.abort()
                session.release()  # a broken producer is not reused: the next write starts a fresh one
                raise

    def delete(self, filter: pc.Expression) -> DeleteResult:
        """Delete the rows `filter` selects, in one commit: they are read at the latest snapshot and written back as
        `-D` (by key on a primary-key table; one count each on a table without one), so the log carries the deleted
        rows too. Optimistic: if another writer commits to a bucket this delete writes to (or any commit lands
        between the read and the write), the delete is re-planned on the new snapshot, within the commit retry
        budget; rows another writer adds that were not there when the delete read are kept."""
        session = self._write_session()
        budget = RetryBudget(self._store.options)
        while True:
            started = time.monotonic()
            snapshot_id = self._store.snapshots.latest_id()
            rows = self.read(filter=filter, snapshot_id=snapshot_id) if snapshot_id is not None else None
            if rows is None or rows.num_rows == 0:
                return DeleteResult(None, 0)
            try:
                session.write(rows.append_column(ROW_KIND_COLUMN, pa.array(["-D"] * rows.num_rows, pa.string())))
                if self._store.snapshots.latest_id() == snapshot_id:  # so the write is based on what was read
                    return DeleteResult(session.commit(), rows.num_rows)
                session.abort()
            except SequenceConflictError:
                session.abort()
            except BaseException:
                session.abort()
                session.release()
                raise
            if not budget.retry(time.monotonic() - started):
                raise CommitRetriesExhaustedError(
                    f"table {self.name!r}: DELETE lost every race with concurrent writers ({budget.describe()}); "
                    f"nothing was deleted")
            log.info("table %s: a concurrent commit since the delete read, retry %s", self.name, budget.retries)

    def truncate(self) -> int:
        """Delete every row in one commit, as `delete` does (the log carries a `-D` of each); the rows deleted."""
        return self.delete(pc.scalar(True)).deleted_rows

    def merge(self, source: Data, *, source_alias: str = "s", target_alias: str = "t") -> TableMerger:
        """MERGE INTO this table (a primary-key table) from `source`, matched on the primary key; add WHEN clauses,
        then `execute()` (one snapshot): `t.merge(src).when_matched_update_all().when_not_matched_insert_all()
        .execute()`. Predicates and values are pyarrow compute expressions over the fields `t.<column>` (the
        target row) and `s.<column>` (the source row). See tablestore/merge.py."""
        engine = self._store.options.merge_engine
        target = MergeTarget(self.name, self.schema, tuple(self.primary_key))
        io = MergeIo(self.read, self._store.snapshots.latest_id, self._write_session)
        return TableMerger.start(target, io, source, source_alias=source_alias, target_alias=target_alias,
                                 engine=engine.name + (" with a sequence.field" if engine.sequence_fields else ""))

    def _write_target(self) -> WriteTarget:
        return WriteTarget.of(self._handle)

    def _write_session(self) -> TableWriter:
        """The handle's one write session (one commit user, one producer: starting a transactional producer
        costs ~0.1-1 s). Rebuilt only if the handle now points at another store or log."""
        target = self._write_target()
        if self._session is None or self._session.target != target:
            self.close()
            self._session = TableWriter(target)
        return self._session

    def close(self) -> None:
        """Release the table's Kafka producer, if it has one (also done when the object is collected)."""
        if self._session is not None:
            self._session.release()

    def compact(
        self, full: bool = False, *, partitions: Sequence[Mapping[str, Any]] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> int | None:
        """Run universal compaction on every bucket (every run merged into one when `full`); the id of the
        COMPACT snapshot, or None when nothing needed compacting. `partitions`: only the partitions matching one of
        these {column: value} specs. `progress(done, total)`: bytes of input files rewritten so far."""
        selected = partition_selector(self.name, self.schema, self.partition_by, partitions)
        return self._write_session().compact(full=full, partitions=selected, progress=progress)

    def commit_compaction(self, messages: Sequence[CommitMessage], snapshot_id: int) -> int | None:
        """One COMPACT snapshot of compaction `messages` rewritten elsewhere (by Spark tasks:
        tablestore/spark/compact_job.py) from the files of snapshot `snapshot_id`; None when there are none."""
        store = self._handle.store
        base = store.live_files(store.snapshots.get(snapshot_id))
        return self._write_session().commit_compaction(list(messages), base)

    def log_writer(self, *, transactional_id: str | None = None, commit_user: str | None = None) -> TableWriter:
        """A write session of its own (its own commit user): `write()` rows or changelogs, `commit()` at each
        checkpoint (one snapshot, and the log's Kafka transaction, then compaction exactly as `write()` does),
        `close()` at the end. Usable as a context manager. A job that restarts from its own checkpoint passes the
        same `commit_user` and `transactional_id` again: re-committing a checkpoint's identifier is then a no-op
        that also repairs the log if the crash fell between the snapshot and the log commit."""
        return TableWriter(self._write_target(), transactional_id=transactional_id, commit_user=commit_user)

    def read_changes(
        self,
        scan: Literal["full", "latest", "from-timestamp"] | None = None,
        timestamp_ms: int | None = None,
        max_records: int | None = None,
        timeout_s: float = 2.0,
        normalize: bool | None = None,
        consumer_id: str | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """The table's changes as Arrow batches with a `_row_kind` column (+I/-U/+U/-D), from its log.

        `scan` (default: the `log.scan` option): "full" reads the latest snapshot as +I rows, then the log from
        exactly the offsets that snapshot covers; "latest" only changes from now on; "from-timestamp" changes from
        the commit holding the first change at or after `timestamp_ms` on. `normalize` (default: the
        `changelog.normalize` option, true): a primary-key table gives the changelog of its commits, as Spark's
        stream reader does (tablestore.log_changes): +I for a new key, -U (old row) then +U (new row) for a changed
        one, -D (old row) for a deleted one, nothing for a key no snapshot showed or an unchanged row; False: the
        records as the log stores them. Stops after `max_records` rows or when nothing arrived for `timeout_s`
        seconds. `consumer_id`: resume where that consumer stopped (ignoring `scan`) and record its progress, which
        expiry respects (tablestore.changes, filestore.consumers).
        """
        if normalize is None:
            normalize = self._handle.options.get(_catalog.CHANGELOG_NORMALIZE)
        return read_changes(self.name, self._store, self._handle.log, self.read_batches, schema=self.schema,
                            primary_key=self.primary_key, scan=scan, timestamp_ms=timestamp_ms,
                            max_records=max_records, timeout_s=timeout_s, normalize=normalize,
                            consumer_id=consumer_id)

    # -- reading -------------------------------------------------------------------------------
    def read(
        self,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
    ) -> pa.Table:
        """The table's rows at the latest snapshot, or at `snapshot_id`, as of `timestamp_ms` (epoch ms), or at
        `tag` (`create_tag`)."""
        snapshot = self._store.resolve_snapshot(snapshot_id, timestamp_ms, tag)
        splits = self._store.new_scan().plan(snapshot, filter)
        return self._store.new_read(columns, filter).to_table(splits)

    def read_batches(
        self,
        columns: Sequence[str] | None = None,
        filter: pc.Expression | None = None,
        snapshot_id: int | None = None,
        timestamp_ms: int | None = None,
        tag: str | None = None,
    ) -> Iterator[pa.RecordBatch]:
        """Like `read`, one split (partition and bucket) at a time, as Arrow record batches."""
        snapshot = self._store.resolve_snapshot(snapshot_id, timestamp_ms, tag)
        splits = self._store.new_scan().plan(snapshot, filter)
        yield from self._store.new_read(columns, filter).read_all(splits)

    def snapshots(self) -> list[SnapshotInfo]:
        delta = self._store.options.delta_metadata
        return [SnapshotInfo.of(s, delta=delta) for s in self._store.snapshots.snapshots()]

    def system_table(self, name: str) -> pa.Table:
        """The system table `name` (tablestore.system_tables): Paimon's schemas, options, partitions, buckets,
        manifests or audit_log (every live row, `rowkind` first), or latest_changes (the latest snapshot's
        changelog)."""
        return system_table(self._handle, name)

    def files(self, snapshot_id: int | None = None) -> list[dict[str, object]]:
        """The live data files (like Paimon's $files table): partition, bucket, level, name, rows, size, and the
        rows its deletion vector deletes (`deletion-vectors.enabled`)."""
        live = self._store.live_files(self._store.resolve_snapshot(snapshot_id))
        keys = self.partition_by
        return [
            {
                "partition": dict(zip(keys, e.partition)),
                "bucket": e.bucket,
                "level": e.file.level,
                "file": e.file.file_name,
                "row_count": e.file.row_count,
                "file_size": e.file.file_size,
                "min_sequence_number": e.file.min_sequence_number,
                "max_sequence_number": e.file.max_sequence_number,
                "deleted_row_count": (dv.cardinality if (dv := live.deletion_vectors.get(e.identifier)) else 0),
            }
            for e in sorted(live.entries.values(), key=lambda e: e.identifier)
        ]

    def describe(self, *, partition: Mapping[str, Any] | None = None) -> dict[str, object]:
        """DESCRIBE DETAIL (FLIP-188): name, path, file format, bucket, keys, options, log, the latest snapshot,
        number and size of files, last modified (the latest snapshot's time); and per partition (only those
        `partition` = {column: value} selects, when given) files, sorted runs per bucket, whether every bucket is
        one run (compacted), and when its newest file was written."""
        latest = self._store.snapshots.latest()
        spec = partition_spec(self.name, self.schema, self.partition_by, partition) if partition else None
        entries = sorted(self._store.live_entries(latest).values(), key=lambda e: e.identifier)
        return {
            "name": self.name,
            "path": self.path,
            "file_format": self._store.options.file_format,
            "columns": [
                {"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in self.schema
            ],
            "primary_key": self.primary_key,
            "partition_by": self.partition_by,
            "bucket": self._store.options.bucket,
            "options": _catalog.redact_options(self.options),   # catalog.secrets: shown, never a secret's value
            "log": log_detail(self._handle.log, bool(self.primary_key)),
            "latest_snapshot": None if latest is None else SnapshotInfo.of(latest).to_dict(),
            "snapshot_count": len(self.snapshots()),
            "last_modified": iso_time(latest.time_millis if latest else None),
            **file_detail(entries, self.schema, self.partition_by, spec),
        }

    def latest_snapshot_id(self) -> int | None:
        return self._store.snapshots.latest_id()

    def __repr__(self) -> str:
        return f"Table({self.name!r}, primary_key={self.primary_key}, partition_by={self.partition_by})"
