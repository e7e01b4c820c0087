"""`TableWriter`: a write session over one table, the unit a streaming job checkpoints and `Table.write` uses.

The session is the one owner of its commit user, its commit identifiers and its committer, and of the live files
of the latest snapshot it knows (`filestore.LiveFiles`, read once per snapshot and passed down: the sequence
numbers of the next write, the commit's validation and the compaction plan all use that value).

Rows go down one way: `write()` converts and checks them once (row kinds by logstore's rules, then the file
store's `conform`), the file store's write puts them in memtables and returns each row's bucket (its one bucket
function), and the log writer produces them to the Kafka partition of that bucket.

`commit()` is the checkpoint, in this order:
1. file store prepare-commit: memtables flushed into sorted runs (files invisible);
2. log prepare: producer flushed; per bucket, the offset after this commit's last record;
3. file store commit: `snapshot-N` published on the session's live files, with those offsets merged into its
   log-offset map; the result carries the live files of `snapshot-N` (derived, not read);
4. log commit: the Kafka transaction commits (transactional consistency), the records become visible;
5. compaction (`write-only`: none; the write waits for the service's instead, tablestore.write_stall):
   universal compaction of the buckets this commit wrote, planned on the live files of step 3, published as a
   COMPACT snapshot with the same commit identifier. A bucket with more sorted runs than
   `num-sorted-run.stop-trigger` must get back to it: the write waits, re-planning on the latest snapshot after a
   conflict. Below the stop trigger a conflicting compaction is skipped (the data is intact);
   a later commit compacts. A compaction that fails deletes the files it wrote, then raises CompactionError,
   which says that the commit's snapshot is in (nothing is lost; do not write the data again).
If 2 or 3 fails the transaction is aborted: readers never see changes the file store does not have. A crash between 3
and 4 leaves the snapshot and an aborted transaction: `full` scans still see every change exactly once (the
snapshot holds them and the log resumes after them); `latest` readers miss that commit's changes unless a session of
the same commit user and transactional id comes back: `commit_prepared` (files written elsewhere, e.g. by Spark
tasks: step 1 done there, step 2 produces the changes read back from those files) repairs the log of a replayed
commit with `recover_log` (docs/design.md, "Writes prepared elsewhere").
Eventual consistency flushes the records before step 3, so they are visible before the snapshot. A table whose rows
merge otherwise than by deduplication logs its merged changes (log_publish.log_changes), which exist only after step
3: its snapshot is published with its log pending, then produced (`_publish_logs`); so is a prepared commit's log
in `log.changelog-mode` = all, the snapshot's changelog (files keep no `-U`: log_publish.diffs_snapshots).
A commit with nothing to publish (no rows, no log offsets, no overwrite) publishes nothing and returns None.
"""
from __future__ import annotations

import logging
import uuid
from typing import Any, Callable, Sequence

import numpy as np
import pyarrow as pa

import filestore
import logstore
from filestore import CommitConflictError, CommitKind, CommitMessage, LiveFiles, Overwrite, Partition
from tablestore import log_publish
from tablestore.convert import checked_row_kinds, to_arrow, value_kinds
from tablestore.errors import CompactionError, LogPublishError, TableStoreError
from tablestore.faults import fault_point
from tablestore.prepared import changes_of
from tablestore.write_stall import wait_for_service
from tablestore.write_target import WriteTarget

log = logging.getLogger(__name__)


class TableWriter:
    def __init__(self, target: WriteTarget, *, commit_user: str | None = None,
                 transactional_id: str | None = None, new_user: bool | None = None) -> None:
        """`commit_user`: resume as that user (its commits are found again on a retry); default a fresh one.
        `transactional_id`: of the Kafka producer, default `tablestore-<commit user>`. `new_user`: the given
        commit user was just made up, so it has no commits to find (default: only when none is given)."""
        self.target = target
        self._store = target.store
        self.commit_user = commit_user or str(uuid.uuid4())
        self._new_user = commit_user is None if new_user is None else new_user
        self._committer = self._store.new_commit(self.commit_user, new_user=self._new_user)
        self._last_identifier = 0
        self._live: LiveFiles | None = None  # live files of the latest snapshot this session knows
        self._file_writer: filestore.FileStoreWrite | None = None
        self._overwrite: Overwrite = None
        self._transactional_id = transactional_id or f"tablestore-{self.commit_user}"
        self._log_writer: logstore.LogWriter | None = None
        self._merged_log = target.log is not None and log_publish.merges_rows(self._store)   # logged after the snapshot
        self._diffed_log = target.log is not None and log_publish.diffs_snapshots(self._store, target.log)  # prepared
        self._closed = False

    # -- writing ---------------------------------------------------------------------------------
    def write(self, data: Any) -> None:
        """Buffer `data` (rows, or a changelog with `_row_kind`); visible after `commit()` (log: see consistency)."""
        self._write(to_arrow(data), overwrite=None)

    def _write(self, arrow: pa.Table, *, overwrite: Overwrite) -> None:
        """`overwrite`: this session's next commit replaces that scope (see filestore.Overwrite); an overwrite
        rewrites the file store only: log readers do not see it (like Paimon's streaming-read-overwrite = false);
        `full` scans restart from the overwrite's snapshot."""
        name = self.target.name
        if self._closed:
            raise TableStoreError(f"table {name!r}: the writer is closed")
        if self._file_writer is not None and overwrite != self._overwrite:
            raise TableStoreError(f"table {name!r}: commit the pending write before writing with another overwrite")
        self._overwrite = overwrite
        row_kinds: pa.Array | pa.ChunkedArray | None = None  # None: all +I (made only if the log needs them)
        kinds: np.ndarray | None = None
        if logstore.ROW_KIND_COLUMN in arrow.schema.names:
            row_kinds = checked_row_kinds(name, arrow)
            arrow = arrow.drop_columns([logstore.ROW_KIND_COLUMN])
            kinds = value_kinds(row_kinds)
        file_writer = self._new_file_writer()
        rows = file_writer.prepare(arrow, kinds)
        buckets = file_writer.write(rows, kinds, conformed=True)
        if self.target.tracked_log is not None and overwrite is None and rows.num_rows and not self._merged_log:
            if row_kinds is None:
                row_kinds = logstore.insert_kinds(rows.num_rows)
            self._producer().write(rows.add_column(0, logstore.ROW_KIND_COLUMN, row_kinds), buckets)

    def _new_file_writer(self) -> filestore.FileStoreWrite:
        """The writer of this commit, on the live files of the latest snapshot (read only when it moved)."""
        if self._file_writer is None:
            self._store.check_identity()  # before any file is written: a dropped table is not recreated
            self._file_writer = self._store.new_write(self._latest_live())
        return self._file_writer

    def _latest_live(self) -> LiveFiles:
        latest_id = self._store.snapshots.latest_id()
        if self._live is None or self._live.snapshot_id != latest_id:
            snapshot = None if latest_id is None else self._store.snapshots.get(latest_id)
            self._live = self._store.live_files(snapshot)
        return self._live

    # -- the commit protocol (see the module docstring) ------------------------------------------
    def _next_identifier(self, identifier: int | None) -> int:
        ident = self._last_identifier + 1 if identifier is None else identifier
        self._last_identifier = max(self._last_identifier, ident)
        return ident

    def commit(self, identifier: int | None = None, *, planned_on: int | None = None) -> int | None:
        """Publish one snapshot with everything written since the last commit, then compact; its id (None when
        there was nothing to commit). Re-committing the same (commit user, identifier) is a no-op returning the
        same id. `planned_on`: the snapshot the written rows were computed from (`Table.merge`; 0: the empty
        table); a data commit since then in a bucket they go to fails this one with filestore.ConcurrentUpdateError
        (nothing committed)."""
        file_writer, overwrite = self._file_writer, self._overwrite
        self._file_writer, self._overwrite = None, None  # the next write starts on the snapshot this one makes
        messages = file_writer.prepare_commit() if file_writer is not None else []  # 1.
        ident = self._next_identifier(identifier)
        merged = self._merged_log and self.target.tracked_log is not None and overwrite is None
        log_writer = self._log_writer if overwrite is None and not merged else None
        return self._publish(messages, ident, overwrite, log_writer, log_pending=merged, log_here=merged,
                             planned_on=planned_on)

    def commit_prepared(self, messages: Sequence[CommitMessage], identifier: int, *,
                        overwrite: Overwrite = None, log: bool | None = None, defer_log: bool = False,
                        planned_on: int | None = None) -> int | None:
        """Commit data files written elsewhere (Spark executor tasks) as this session's commit `identifier`, by the
        protocol of `commit()`: the tasks did step 1; step 2 produces the changes of the files (read back, see
        tablestore.prepared) to the log, unless `log` (default: the target's change-tracking) is False or this is
        an overwrite (a table whose rows merge: after the snapshot). `defer_log`: instead of step 2, the snapshot is
        published with its log pending, for the caller to have the buckets produced elsewhere
        (tablestore.log_publish: `pending_plans` lists it). Idempotent: when this (commit user,
        identifier) is already in, these files are deleted and the log is repaired if that commit's log
        transaction was lost (`recover_log`; a pending log stays for the caller); its snapshot id is returned.
        `planned_on`: the snapshot the rows were computed from (a MERGE or UPDATE); a data commit since then in a
        bucket these files are in fails this one with filestore.ConcurrentUpdateError (nothing committed)."""
        if self._file_writer is not None:
            raise TableStoreError(f"table {self.target.name!r}: commit the pending write first")
        self._last_identifier = max(self._last_identifier, identifier)
        log = self.target.change_tracking if log is None else log
        done = None if self._new_user else self._committer.find_committed(identifier)
        if done is not None:  # a replay of a committed batch
            filestore.delete_added_files(self._store.context, messages)
            latest = self._store.snapshots.latest()
            if log and (latest is None or done not in latest.log_pending):
                self.recover_log(done)
            elif log and self._diffed_log and not defer_log:
                self._publish_logs(done)   # that attempt's log is still pending: published here
            return done
        log_here = self._diffed_log and log and overwrite is None and not defer_log
        deferred = (defer_log or log_here) and log and overwrite is None and self.target.log is not None
        log_writer = None
        if log and overwrite is None and self.target.log is not None and not deferred:
            log_writer = self._producer()
            try:
                for changes, buckets in changes_of(self._store.context, messages):
                    log_writer.write(changes, buckets)
            except BaseException:
                log_writer.abort()
                self._clean_up(list(messages), identifier, CommitKind.APPEND)
                raise
        self._latest_live()
        return self._publish(list(messages), identifier, overwrite, log_writer, log_pending=deferred,
                             log_here=log_here, planned_on=planned_on)

    def _producer(self) -> logstore.LogWriter:
        assert self.target.log is not None
        if self._log_writer is None:
            self._log_writer = self.target.log.new_writer(self._transactional_id)
        return self._log_writer

    def recover_log(self, snapshot_id: int) -> bool:
        """Step 4 again for this session's commit `snapshot_id`, if its Kafka transaction was lost (a crash or a
        failure between steps 3 and 4; see docs/design.md, "Writes prepared elsewhere"): whether it republished.
        Starting this session's transactional producer fences a zombie with the same transactional id and settles
        its open transaction; then the last record the snapshot's offsets cover tells whether the transaction
        committed. If not, the snapshot's added files are produced again in a new transaction, and a log-only
        snapshot (kind COMPACT, same identifier: no data change) records the offsets after them."""
        log_store = self.target.log
        if log_store is None or log_store.options.consistency != "transactional":
            return False  # eventual consistency flushes before step 3: nothing of a published snapshot is lost
        snapshots = self._store.snapshots
        snapshot = snapshots.get(snapshot_id)
        # the log of this commit is the records of its last repair, if it had any: a log-only snapshot after it
        last = snapshot
        for sid in range(snapshot_id + 1, (snapshots.latest_id() or 0) + 1):
            s = snapshots.get(sid) if snapshots.exists(sid) else None
            if s is not None and s.commit_kind == CommitKind.COMPACT and s.delta_record_count == 0 and (
                    s.commit_user, s.commit_identifier) == (self.commit_user, snapshot.commit_identifier) and (
                    snapshots.exists(sid - 1) and snapshots.get(sid - 1).log_offsets != s.log_offsets):
                last = s
        before = snapshots.get(last.id - 1).log_offsets if snapshots.exists(last.id - 1) else {}
        written = sorted((p, o) for p, o in last.log_offsets.items() if before.get(p) != o)
        if not written:
            return False
        writer = self._producer()
        writer.start()  # init_transactions: the zombie is fenced, its transaction committed or aborted
        partition, end = written[0]
        if log_store.new_reader().holds(partition, end - 1):
            return False
        log.warning("table %s: snapshot %s is missing from the log (its transaction was lost): producing it again",
                    self.target.name, snapshot_id)
        for changes, buckets in log_publish.log_changes(self._store, log_store, snapshot):
            writer.write(changes, buckets)
        try:
            offsets = writer.prepare()
            self._committer.publish([], identifier=snapshot.commit_identifier, kind=CommitKind.COMPACT,
                                    log_offsets=offsets)
        except BaseException:
            writer.abort()
            raise
        writer.commit()
        return True

    def _publish(self, messages: list[CommitMessage], ident: int, overwrite: Overwrite,
                 log_writer: logstore.LogWriter | None, *, log_pending: bool = False, log_here: bool = False,
                 planned_on: int | None = None) -> int | None:
        """Steps 2-5 of the protocol (see the module docstring); `log_pending`: the snapshot's log comes later
        (tablestore.log_publish), from this session right after the snapshot when `log_here`."""
        try:
            offsets = log_writer.prepare() if log_writer is not None else {}  # 2.
            if not messages and not offsets and overwrite is None:
                if log_writer is not None:
                    log_writer.abort()
                return None
            fault_point("before-snapshot")
            result = self._committer.publish(messages, identifier=ident, log_offsets=offsets,  # 3.
                                             overwrite=overwrite, base=self._live,
                                             log_pending=log_pending and any(m.added for m in messages),
                                             planned_on=planned_on)
        except BaseException:
            if log_writer is not None:
                log_writer.abort()
            self._clean_up(messages, ident, CommitKind.APPEND)  # never published: this attempt's files are garbage
            raise
        if result.live is None:  # an earlier attempt of this identifier is in: these files and records are nobody's
            if log_writer is not None:
                log_writer.abort()
            filestore.delete_added_files(self._store.context, messages)
            if log_writer is not None and result.snapshot_id is not None:
                self.recover_log(result.snapshot_id)  # that attempt may have lost its log transaction
            if log_here:
                self._publish_logs(result.snapshot_id)
            return result.snapshot_id
        fault_point("before-log-commit")
        if log_writer is not None:
            log_writer.commit()  # 4.
        fault_point("after-log-commit")
        self._live = result.live
        if log_here:
            self._publish_logs(result.snapshot_id)  # 4., for a log of merged changes (log_publish.log_changes)
        if messages and not self._store.options.write_only:
            try:
                self._compact({(m.partition, m.bucket) for m in messages}, ident)  # 5.
            except Exception as e:
                raise CompactionError(self.target.name, result.snapshot_id, e) from e
        elif messages:   # 5. write-only: wait for the service's compaction above the stop trigger (write_stall)
            wait_for_service(self.target.name, self._store, {(m.partition, m.bucket) for m in messages}, self._live)
        return result.snapshot_id

    def _publish_logs(self, snapshot_id: int | None) -> None:
        """Pending logs (this session's, dead writers'), produced after snapshot `snapshot_id` (LogPublishError)."""
        assert self.target.log is not None
        try:
            log_publish.publish_pending(self.target.name, self._store, self.target.log, self.commit_user)
        except Exception as e:
            raise LogPublishError(self.target.name, snapshot_id, e) from e

    def _compact(self, written: set[tuple[tuple[str, ...], int]], identifier: int) -> None:
        """5. Universal compaction of the buckets just written; buckets above the stop trigger must get back
        to it (re-planned on the latest snapshot after a conflict, waiting as commits do), the others are best
        effort."""
        store = self._store
        o = store.options
        budget = filestore.RetryBudget(o)
        while True:
            live = self._latest_live()
            counts = filestore.sorted_run_counts(live, written)
            stalled = {where for where, n in counts.items() if n > o.stop_trigger}
            messages = filestore.compact(store.context, live.snapshot, buckets=written - stalled, live=live)
            if stalled:  # picked down to the stop trigger (or the compaction trigger, if lower) at least
                messages += filestore.compact(store.context, live.snapshot, buckets=stalled, live=live,
                                              trigger=min(o.compaction_trigger, o.stop_trigger))
            if not messages:
                return
            try:
                result = self._committer.publish(messages, identifier=identifier, kind=CommitKind.COMPACT, base=live)
            except CommitConflictError as e:  # a concurrent overwrite won; the data is intact
                self._clean_up(messages, identifier, CommitKind.COMPACT, base=live)
                if not stalled:
                    log.info("table %s: compaction skipped: %s", self.target.name, e)
                    return
                log.info("table %s: compaction of buckets at the stop trigger conflicted, re-planning: %s",
                         self.target.name, e)
                if budget.retry():
                    continue
                log.warning("table %s: buckets stay above num-sorted-run.stop-trigger=%s after %s",
                            self.target.name, o.stop_trigger, budget.describe())
                return
            except BaseException:
                self._clean_up(messages, identifier, CommitKind.COMPACT, base=live)
                raise
            self._live = result.live
            return

    def compact(
        self, *, full: bool = False, identifier: int | None = None,
        partitions: Callable[[Partition], bool] | None = None, progress: Callable[[int, int], None] | None = None,
    ) -> int | None:
        """Compact every bucket (every run into one when `full`; only the partitions `partitions` accepts) as this
        session's user; the COMPACT snapshot's id, None if nothing needed it. `progress(done, total)`: bytes so far."""
        self._store.check_identity()
        live = self._latest_live()
        messages = filestore.compact(self._store.context, live.snapshot, full=full, live=live, partitions=partitions,
                                     progress=progress)
        return self.commit_compaction(messages, live, identifier=identifier)

    def commit_compaction(self, messages: list[CommitMessage], base: LiveFiles, identifier: int | None = None
                          ) -> int | None:
        """One COMPACT snapshot of `messages` rewritten from `base` (None: no messages); a failure cleans up."""
        if not messages:
            return None
        ident = self._next_identifier(identifier)
        try:
            result = self._committer.publish(messages, identifier=ident, kind=CommitKind.COMPACT, base=base)
        except BaseException:
            self._clean_up(messages, ident, CommitKind.COMPACT, base=base)
            raise
        self._live = result.live
        return result.snapshot_id

    def _clean_up(self, messages: list[CommitMessage], identifier: int, kind: CommitKind,
                  base: LiveFiles | None = None) -> None:
        """After a failed commit: delete the data files it would have added, unless its snapshot was published
        after all (the error came later, e.g. while updating the LATEST hint). Unsure (the check fails too):
        keep them; at worst they are orphans for `remove_orphan_files`."""
        if not any(m.added for m in messages):
            return
        try:
            if self._landed(identifier, kind, base if base is not None else self._live):
                return
        except Exception as e:  # noqa: BLE001 - the original error is what the caller must see
            log.warning("table %s: could not tell whether a failed commit landed, keeping its files: %s",
                        self.target.name, e)
            return
        filestore.delete_added_files(self._store.context, messages)

    def _landed(self, identifier: int, kind: CommitKind, base: LiveFiles | None) -> bool:
        """Whether a snapshot of this user, identifier and kind exists after `base`'s snapshot."""
        snapshots = self._store.snapshots
        latest = snapshots.latest_id()
        if latest is None:
            return False
        first = base.snapshot_id + 1 if base is not None and base.snapshot_id is not None else 1
        for sid in range(max(first, snapshots.earliest_id() or 1), latest + 1):
            s = snapshots.get(sid)
            overwritten = kind == CommitKind.APPEND and s.commit_kind == CommitKind.OVERWRITE
            if (s.commit_user, s.commit_identifier) == (self.commit_user, identifier) and (
                    s.commit_kind == kind or overwritten):
                return True
        return False

    # -- ending ----------------------------------------------------------------------------------
    def abort(self) -> None:
        """Drop what was written since the last commit (the log's transaction is aborted)."""
        if self._log_writer is not None:
            self._log_writer.abort()
        self._file_writer, self._overwrite = None, None

    def release(self) -> None:
        """Close the Kafka producer (a fresh one starts at the next write); the session stays usable."""
        if self._log_writer is not None:
            self._log_writer.close()
            self._log_writer = None

    def close(self) -> None:
        self.release()
        self._closed = True

    def __enter__(self) -> "TableWriter":
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is not None:
            self.abort()
        self.close()
