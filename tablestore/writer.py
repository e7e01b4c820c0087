"""`TableWriter`: a write session over one table, the unit a streaming job checkpoints.

Rows go to the file store's memtables and, when the table has a log, to its topic (partition = the row's bucket,
from the file store's one bucket function). `commit()` is the checkpoint, in this order:
1. file store prepare-commit: memtables flushed into sorted runs (files invisible);
2. log prepare: producer flushed; per bucket, the offset after this commit's last record;
3. file store commit: `snapshot-N` published, with those offsets merged into its log-offset map;
4. log commit: the Kafka transaction commits (transactional consistency), the records become visible.
If 2 or 3 fails the transaction is aborted: readers never see changes the file store does not have. A crash between 3
and 4 leaves the snapshot and an aborted transaction: `full` scans still see every change exactly once (the
snapshot holds them and the log resumes after them); `latest` readers miss that commit's changes.
Eventual consistency flushes the records before step 3, so they are visible before the snapshot.
"""
from __future__ import annotations

import itertools
import logging
import uuid
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from filestore.commit import Overwrite
from filestore.errors import CommitConflictError
from filestore.meta import CommitMessage
from logstore.changes import ROW_KIND_COLUMN, RowKind
from logstore.writer import LogWriter
from tablestore.convert import to_arrow, value_kinds
from tablestore.errors import TableStoreError

if TYPE_CHECKING:
    from tablestore.table import Table

log = logging.getLogger(__name__)


class TableWriter:
    def __init__(
        self,
        table: "Table",
        *,
        commit_user: str | None = None,
        transactional_id: str | None = None,
        overwrite: Overwrite = None,
        log_writer: LogWriter | None = None,
        new_user: bool = False,
    ) -> None:
        """`log_writer`: an idle LogWriter to reuse (its producer stays connected); this writer then leaves it
        open on close, the owner closes it."""
        self.table = table
        self._store = table._handle.store
        self._log = table._handle.log
        self.commit_user = commit_user or str(uuid.uuid4())
        self._committer = self._store.new_commit(self.commit_user, new_user=new_user or commit_user is None)
        self._identifiers = itertools.count(1)
        self._overwrite = overwrite
        self._file_writer = self._store.new_write()
        # an overwrite rewrites the file store only: log readers do not see it (like Paimon's
        # streaming-read-overwrite = false); `full` scans restart from the overwrite's snapshot
        self._log_writer: LogWriter | None = None
        self._owns_log_writer = log_writer is None
        if self._log is not None and overwrite is None:
            self._log_writer = log_writer or self._log.new_writer(transactional_id or f"tablestore-{self.commit_user}")
        self._closed = False
        self.last_messages: list[CommitMessage] = []

    def write(self, data: Any) -> None:
        """Buffer `data` (rows, or a changelog with `_row_kind`); visible after `commit()` (log: see consistency)."""
        if self._closed:
            raise TableStoreError(f"table {self.table.name!r}: the writer is closed")
        arrow = to_arrow(data)
        kinds = None
        row_kinds = None
        if ROW_KIND_COLUMN in arrow.schema.names:
            row_kinds = arrow.column(ROW_KIND_COLUMN)
            kinds = value_kinds(self.table.name, row_kinds)
            arrow = arrow.drop_columns([ROW_KIND_COLUMN])
        rows = self._file_writer.conform(arrow)
        buckets = self._file_writer.write(rows, kinds)
        if self._log_writer is not None and rows.num_rows:
            if row_kinds is None:
                row_kinds = pa.chunked_array([pa.array(np.full(rows.num_rows, RowKind.INSERT.value, dtype=object),
                                                       pa.string())])
            changes = rows.add_column(0, ROW_KIND_COLUMN, row_kinds)
            self._log_writer.write(changes, buckets)

    def commit(self, identifier: int | None = None) -> int | None:
        """Publish one snapshot with everything written since the last commit; its id. Re-committing the same
        (commit user, identifier) is a no-op returning the same id."""
        messages = self._file_writer.prepare_commit()
        ident = next(self._identifiers) if identifier is None else identifier
        try:
            offsets = self._log_writer.prepare() if self._log_writer is not None else {}
            sid = self._committer.commit(
                messages, identifier=ident, log_offsets=offsets, overwrite=self._overwrite
            )
        except BaseException as e:
            if self._log_writer is not None:
                self._log_writer.abort()
            if isinstance(e, CommitConflictError):  # never published: the files of this attempt are garbage
                for m in messages:
                    for f in m.added:
                        self._store.io.delete(self._store.data_file_path(m.partition, m.bucket, f.file_name))
            raise
        if self._log_writer is not None:
            self._log_writer.commit()
        self.last_messages = messages
        return sid

    def abort(self) -> None:
        if self._log_writer is not None:
            self._log_writer.abort()
        self._file_writer = self._store.new_write()

    def close(self) -> None:
        if self._log_writer is not None:
            if self._owns_log_writer:
                self._log_writer.close()
            else:
                self._log_writer.abort()  # leaves it idle (a no-op after a commit) for its owner to reuse
        self._closed = True

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        self.close()
