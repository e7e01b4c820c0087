"""One micro-batch of `ingest-database` written into every table it holds by one Spark job (an internal job of the
ingest, not the `managed` data source): per micro-batch a table costs a decoder plan and a commit, not a Spark job,
its planning and its Python workers of its own.

The protocol, per micro-batch (tablestore/spark/database_sync.py runs it):
1. the micro-batch's records are decoded into every table by one plan (tablestore/spark/database_decode.py): the
   table's index `__t` beside its changes (`_row_kind` and its columns) in slots shared by the tables;
2. `mapInArrow`: each task writes its rows of each table with the file store's writer (`FileStoreWrite`, on the
   sequence numbers the driver read from the table's latest snapshot, shifted by the task's stride; unchanged values
   looked up at that snapshot) and answers one row per table it wrote: the commit messages, pickled;
3. the driver commits each table's messages as that table's idempotent commit (`commit_prepared`: commit user
   `spark-txn-<app id>`, identifier batch id + 1, as a `txnAppId`/`txnVersion` write, tablestore/spark/write.py):
   the table's log first (its Kafka transaction), then its snapshot; a micro-batch Spark runs again after a crash
   finds the tables it committed and deletes their new files. Tables commit side by side; a session (its producer
   warm) is kept per table across micro-batches.
A task's files whose micro-batch fails before step 3 stay unreferenced: `remove_orphan_files` deletes them.
"""
from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import pyarrow as pa
import pyarrow.compute as pc

from filestore import CommitMessage, FileStoreWrite, Partition
from logstore import ROW_KIND_COLUMN
from tablestore.convert import checked_row_kinds, value_kinds
from tablestore.spark.database_decode import SLOT, TABLE_INDEX, Layout, Packed
from tablestore.spark.source_options import TableRef
from tablestore.spark.write import SEQUENCE_STRIDE, WRITE_CHUNK_ROWS, SparkWriteError, _TaskSequences
from tablestore.write_target import WriteTarget
from tablestore.writer import TableWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from catalog import CatalogTable

MESSAGES = pa.schema([pa.field(TABLE_INDEX, pa.int32()), pa.field("messages", pa.binary())])
MESSAGES_DDL = f"{TABLE_INDEX} INT, messages BINARY"


@dataclass(frozen=True)
class TableTarget:
    """What a task needs to write one table: where it is and the snapshot its sequence numbers continue from."""

    ref: TableRef
    base_snapshot_id: int | None
    committed: tuple[tuple[tuple[Partition, int], int], ...]


def target_of(ref: TableRef, handle: "CatalogTable") -> TableTarget:
    store = handle.store
    base = store.snapshots.latest()
    committed = store.live_files(base).max_sequence_numbers()
    return TableTarget(ref, None if base is None else base.id, tuple(sorted(committed.items())))


def write_tables(rows: Packed, targets: Sequence[TableTarget], tasks: int) -> dict[int, list[CommitMessage]]:
    """Steps 1-2: the packed rows written by one job of `tasks` tasks (the union's partitions merged, each keeping
    its rows' order: a key's changes, all in one of them, stay in order); per table index, its commit messages."""
    found: dict[int, list[CommitMessage]] = {}
    job = rows.rows.coalesce(tasks).mapInArrow(_task(tuple(targets), rows.layout), MESSAGES_DDL)
    for row in job.collect():
        found.setdefault(int(row[TABLE_INDEX]), []).extend(pickle.loads(row["messages"]))
    return found


def _task(targets: tuple[TableTarget, ...],
          layout: Layout) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        from tablestore.spark.profiling import profiled

        context = TaskContext.get()
        task = context.partitionId() if context is not None else 0
        writers: dict[int, _TableWrite] = {}
        with profiled(f"database-write-task{task}"):
            for batch in batches:
                index = batch.column(TABLE_INDEX)
                for i in pc.unique(index).to_pylist():
                    mine = batch.filter(pc.equal(index, pa.scalar(i, pa.int32())))
                    rows = pa.Table.from_arrays([mine.column(SLOT.format(slot)) for _, slot in layout[i]],
                                                names=[name for name, _ in layout[i]])
                    writers.setdefault(i, _TableWrite(targets[i], task)).add(rows)
            done = [(i, pickle.dumps(writer.finish())) for i, writer in sorted(writers.items())]
        for i, messages in done:
            yield pa.RecordBatch.from_arrays([pa.array([i], pa.int32()), pa.array([messages], pa.binary())],
                                             schema=MESSAGES)

    return run


class _TableWrite:
    """A task's writer of one table (as tablestore/spark/write.py's `_write_task`, for rows handed over in pieces)."""

    def __init__(self, target: TableTarget, task: int) -> None:
        handle = target.ref.handle()
        store = handle.store
        self.target, self.task, self.store = target, task, store
        self.committed = dict(target.committed)
        base = None if target.base_snapshot_id is None else store.snapshots.get(target.base_snapshot_id)
        self.writer = FileStoreWrite(store.context, _TaskSequences(self.committed, task * SEQUENCE_STRIDE),
                                     base=lambda: store.live_files(base))
        self.pending: list[pa.Table] = []
        self.rows = 0

    def add(self, rows: pa.Table) -> None:
        self.pending.append(rows)
        self.rows += rows.num_rows
        if self.rows >= WRITE_CHUNK_ROWS:
            self._apply()

    def _apply(self) -> None:
        if not self.pending:
            return
        data = pa.concat_tables(self.pending)
        self.pending, self.rows = [], 0
        kinds = value_kinds(checked_row_kinds(self.target.ref.identifier, data))
        self.writer.write(data.drop_columns([ROW_KIND_COLUMN]), kinds)

    def finish(self) -> list[CommitMessage]:
        self._apply()
        messages = self.writer.prepare_commit()
        for m in messages:
            limit = self.committed.get((m.partition, m.bucket), -1) + (self.task + 1) * SEQUENCE_STRIDE
            if any(f.max_sequence_number > limit for f in m.added):
                raise SparkWriteError(f"table {self.target.ref.identifier!r}: task {self.task} wrote more than "
                                      f"{SEQUENCE_STRIDE} rows into bucket {m.bucket}: use more input partitions")
        return messages


class Committer:
    """Step 3: each table's commit of a micro-batch, in a session kept per table while its table does not change."""

    def __init__(self, app_id: str) -> None:
        self.app_id = app_id
        self._sessions: dict[tuple[str, int], TableWriter] = {}

    def commit(self, handle: "CatalogTable", messages: list[CommitMessage], batch_id: int) -> int | None:
        key = (handle.identifier, handle.schema.id)
        session = self._sessions.pop(key, None) or TableWriter(
            WriteTarget.of(handle), commit_user=f"spark-txn-{self.app_id}",
            transactional_id=f"tablestore-{handle.identifier}-txn-{self.app_id}")
        try:
            done = session.commit_prepared(messages, batch_id + 1)
        except BaseException:
            session.close()   # its producer may hold a doomed transaction: the next micro-batch starts afresh
            raise
        self._sessions[key] = session
        return done

    def close(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()


def table_of(message: str) -> str | None:
    """The table a decoder error names (`... table <identifier>: ...`)."""
    import re

    found = re.search(r"table (\S+?): ", message)
    return found.group(1) if found else None


__all__ = ["Committer", "TableTarget", "table_of", "target_of", "write_tables"]
