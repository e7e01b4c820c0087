"""Streaming writes of the `managed` data source: `df.writeStream.format("managed").start("db.orders")`.

Each micro-batch is one job of tablestore/spark/write.py, committed exactly once:
1. tasks (executors) write data files on the latest snapshot when they start (the previous batch, its compaction
   included, is in by then: Spark commits batch N before it plans N + 1) and return them with the query id and
   batch id Spark gives every task;
2. `commit(messages, batch_id)` (a fresh driver-side Python worker per batch) runs the write session
   (tablestore.writer.TableWriter.commit_prepared) as commit user `spark-stream-<query id>` with identifier
   `batch id + 1` and the transactional id `tablestore-<table>-<query id>`: log records of the files in one
   Kafka transaction, the snapshot, the log commit, then compaction within `num-sorted-run.stop-trigger`;
3. a batch Spark replays after a restart (it replays the last planned batch, same id and offsets, when its commit
   was not recorded in the checkpoint) finds its (commit user, identifier) already in: its files are deleted and
   the log is repaired if the crash fell between the snapshot and the log commit (`TableWriter.recover_log`);
4. `abort(messages, batch_id)` deletes the batch's files unless its snapshot is in.
The query id is stable across restarts from one checkpoint; a new checkpoint is a new query (a new commit user).

Steps 2 and 4 run in the JVM's commit service (catalog/ServiceCommit.java: a process of
tablestore/spark/catalog_service.py started in the background when the write is planned), whose action
`commit_stream_write` builds this writer and calls `commit` with the tasks' pickled commit messages: PySpark would commit in two Python workers of modules of
their own, which PySpark 4.1 starts as daemons on first use (about 2.5 s of a query's first micro-batch).

The commit service (or a driver-side Python worker of Spark's) runs each batch's commit and stays for the next: the write
session of step 2 stays open there between batches (`_SESSIONS`, a few per process), so a batch does not start a
Kafka producer again (`init_transactions`: about 60 ms) nor reload the table. A session is kept only after a commit
that succeeded (then its producer has no open transaction); any failure closes it, and the next batch (or Spark's
replay of this one) opens a fresh one, which fences the old producer as before. The key holds everything the
session was opened with (table identity, options, schema, query, transactional id): a table altered or dropped and
created again gets a new session.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Hashable

from pyspark.sql.datasource import DataSourceStreamArrowWriter, WriterCommitMessage

from filestore import CommitMessage
from tablestore.spark.profiling import profiled
from tablestore.spark.write import ManagedWriter, SparkWriteError, TaskCommit, _delete
from tablestore.writer import TableWriter

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

    from filestore import FileStore, Snapshot

SessionKey = tuple[Hashable, str, str]
"""(the table's state, see ManagedWriter.table_state; query id; transactional id)"""
_SESSIONS: "OrderedDict[SessionKey, TableWriter]" = OrderedDict()
"""Open write sessions of this Python worker, by `_session_key`, least recently used first."""
_KEEP_SESSIONS = 4


@dataclass(frozen=True)
class StreamTaskCommit(TaskCommit):
    """A streaming task's files, with the query and batch Spark ran it for."""

    query_id: str = ""
    batch_id: int = -1


def commit_user(query_id: str) -> str:
    return f"spark-stream-{query_id}"


class ManagedStreamWriter(ManagedWriter, DataSourceStreamArrowWriter):
    def __init__(self, options: dict[str, str], schema: "StructType", overwrite: bool) -> None:
        if overwrite:
            raise SparkWriteError(f"table {options.get('path') or options.get('table')!r}: a streaming write "
                                  "appends (output mode complete is not supported)")
        super().__init__(options, schema, False)

    def _clustered_by_spark(self) -> bool:
        return False   # a streaming write's tasks may hold rows of any bucket

    def _driver_sequences(self, store: "FileStore", base: "Snapshot | None") -> None:
        return None   # one writer serves every micro-batch: each batch's tasks read the latest snapshot's

    def _base(self, store: "FileStore") -> "Snapshot | None":
        return store.snapshots.latest()

    def _task_commit(self, task: int, messages: tuple[CommitMessage, ...]) -> TaskCommit:
        from pyspark import TaskContext

        context = TaskContext.get()
        query_id = (context.getLocalProperty("sql.streaming.queryId") if context is not None else None) or ""
        batch = context.getLocalProperty("streaming.sql.batchId") if context is not None else None
        return StreamTaskCommit(task, messages, query_id, int(batch) if batch is not None else -1)

    def _query(self, messages: list[WriterCommitMessage | None], batch_id: int) -> str | None:
        queries = {m.query_id for m in messages if isinstance(m, StreamTaskCommit)}
        if len(queries) > 1:
            raise SparkWriteError(f"table {self.ref.identifier!r}: batch {batch_id} has tasks of queries {queries}")
        return next(iter(queries), None)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        query_id = self._query(messages, batchId)
        if query_id is None:
            return  # no task ran: nothing was written
        everything = [cm for m in messages if isinstance(m, TaskCommit) for cm in m.messages]
        transactional_id = f"tablestore-{self.ref.identifier}-{query_id}"
        key: SessionKey = (self.table_state, query_id, transactional_id)
        with profiled(f"stream-commit-{batchId}"):
            self._commit(key, everything, batchId)

    def _commit(self, key: SessionKey, everything: list[CommitMessage], batchId: int) -> None:
        _, query_id, transactional_id = key
        session = _SESSIONS.pop(key, None) or self.session(commit_user(query_id), transactional_id)
        try:
            self.commit_session(session, everything, batchId + 1)
        except BaseException:
            session.close()   # its producer may hold an open or doomed transaction: the next batch starts afresh
            raise
        _SESSIONS[key] = session
        while len(_SESSIONS) > _KEEP_SESSIONS:
            _SESSIONS.popitem(last=False)[1].close()

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        query_id = self._query(messages, batchId)
        if query_id is None:
            return
        store = self.ref.handle().store
        for key in [k for k in _SESSIONS if k[1] == query_id]:
            _SESSIONS.pop(key).close()
        if store.new_commit(commit_user(query_id)).find_committed(batchId + 1) is not None:
            return  # the batch is in: its files are the table's
        _delete(store, [cm for m in messages if isinstance(m, TaskCommit) for cm in m.messages])

