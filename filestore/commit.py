"""The global commit: commit messages -> manifest -> manifest list -> `snapshot-(N+1)`.

Protocol (one attempt; the whole attempt repeats when another writer publishes first):
1. If a snapshot of this (commit user, identifier) exists, return its id: re-committing is a no-op. (Not for a
   COMPACT commit: it is never a retry of a user's commit; it shares the identifier of the commit it follows.)
2. Check the table is still the one this store was loaded from (TableDroppedError otherwise). Read the latest
   snapshot N and its live files, unless the caller passed them as a value (`base`) for N.
3. Build the commit as a value (`_Delta`): files added, files deleted (the messages' deletions plus, for an
   overwrite, every live file in its scope), log offsets, kind. No side effects yet.
4. Validate it against snapshot N in one place: every deleted file must be live in N, else CommitConflictError
   (retrying cannot help; the caller must re-plan). A commit whose rows were computed from an older snapshot P
   (`planned_on`: a MERGE or UPDATE read its old rows there) also requires that no data commit after P touched a
   bucket it writes, else ConcurrentUpdateError (its rows may rest on values that are gone: a lost update).
5. Write the delta manifest and the manifest lists (new, uniquely named files: invisible until step 6); with
   deletion vectors, the vectors the commit sets and the snapshot's vector index (filestore.deletion).
6. Publish `snapshot-(N+1)` with an exclusive create. Lost the race: delete the files of step 5, go to 1.
A crash anywhere before 6 leaves only unreferenced files (orphans); after 6 the commit is complete.
7. Publish the snapshot to the table's Delta and Iceberg views, if it has any (filestore.views): best effort, after
   the commit; a view left behind by a crash or a failure catches up at the next commit.
The result carries the live files of the published snapshot, derived from N's and the delta without a read.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Literal, Mapping, Sequence

from filestore import deletion, views
from filestore.errors import (CommitConflictError, CommitRetriesExhaustedError, ConcurrentUpdateError,
                              SequenceConflictError)
from filestore.live import LiveFiles
from filestore.retry import RetryBudget
from filestore.meta import CommitKind, CommitMessage, FileKind, ManifestEntry, ManifestFileMeta, Partition, Snapshot
from filestore.context import StoreContext


log = logging.getLogger(__name__)

Overwrite = Literal["all", "dynamic"] | Mapping[str, str] | frozenset[Partition] | None
"""None: append. "all": replace the whole table. "dynamic": replace the partitions the new files are in.
A mapping of partition key -> rendered value: replace the partitions matching that (possibly partial) spec.
A frozenset of partitions (rendered values): replace exactly those."""


@dataclass(frozen=True)
class CommitResult:
    """What a commit published: the snapshot id (None when nothing was committed on an empty table) and the live
    files of the table after it (None when the commit had already been made by an earlier attempt)."""

    snapshot_id: int | None
    live: LiveFiles | None


@dataclass(frozen=True)
class _Delta:
    entries: tuple[ManifestEntry, ...]
    added_rows: int
    deleted_rows: int


class FileStoreCommit:
    def __init__(self, context: StoreContext, commit_user: str, *, new_user: bool = False) -> None:
        """`new_user`: the commit user was just generated, so none of its commits can exist yet and step 1
        (a scan back through the snapshots) is skipped for its first commit."""
        self.context = context
        self.commit_user = commit_user
        self._may_have_committed = not new_user

    def find_committed(self, identifier: int) -> int | None:
        """The id of the snapshot this user committed with `identifier`, if any (scanning newest first)."""
        sm = self.context.snapshots
        latest, earliest = sm.latest_id(), sm.earliest_id()
        if latest is None or earliest is None:
            return None
        for sid in range(latest, earliest - 1, -1):
            if not sm.exists(sid):
                continue
            s = sm.get(sid)
            if s.commit_user == self.commit_user and s.commit_kind != CommitKind.COMPACT:
                if s.commit_identifier == identifier:
                    return sid
                if s.commit_identifier < identifier:
                    return None
        return None

    def commit(
        self,
        messages: Sequence[CommitMessage],
        *,
        identifier: int,
        kind: CommitKind = CommitKind.APPEND,
        log_offsets: Mapping[int, int] | None = None,
        overwrite: Overwrite = None,
        base: LiveFiles | None = None,
    ) -> int | None:
        """Publish one snapshot for `messages`; its id (None when there was nothing to commit on an empty table)."""
        return self.publish(messages, identifier=identifier, kind=kind, log_offsets=log_offsets,
                            overwrite=overwrite, base=base).snapshot_id

    def publish(
        self,
        messages: Sequence[CommitMessage],
        *,
        identifier: int,
        kind: CommitKind = CommitKind.APPEND,
        log_offsets: Mapping[int, int] | None = None,
        overwrite: Overwrite = None,
        base: LiveFiles | None = None,
        log_pending: bool = False,
        log_published: int | None = None,
        planned_on: int | None = None,
    ) -> CommitResult:
        """Like `commit`, with the live files after it. `base`: the live files of the snapshot the messages were
        written on; used as is while that snapshot is still the latest (no manifest is read then).
        `log_pending`: this snapshot's changes reach the log later (added to `Snapshot.log_pending`);
        `log_published`: this (log-only) snapshot records the log of that pending snapshot (taken out of it).
        `planned_on`: the snapshot the messages' rows were computed from (0: the empty table before the first);
        a data commit after it in a bucket they write fails this one (step 4)."""
        if overwrite is not None:
            kind = CommitKind.OVERWRITE
        began_ms = int(time.time() * 1000)
        budget = RetryBudget(self.context.options)
        while True:
            if self._may_have_committed and kind != CommitKind.COMPACT:
                done = self.find_committed(identifier)
                if done is not None:
                    return CommitResult(done, None)
            self.context.check_identity()
            latest_id = self.context.snapshots.latest_id()
            if base is None or base.snapshot_id != latest_id:
                base = self.context.live_files(None if latest_id is None else self.context.snapshots.get(latest_id))
            latest, live = base.snapshot, dict(base.entries)
            delta = self._build(messages, live, overwrite)
            if not delta.entries and not log_offsets and overwrite is None and log_published is None:
                return CommitResult(None if latest is None else latest.id, base)
            if planned_on is not None:
                self._validate_unchanged(delta, planned_on, latest)
            self._validate(delta, live, kind)
            written: list[str] = []
            index, vectors = (deletion.commit_vectors(self.context, base, delta.entries, written)
                              if self.context.options.deletion_vectors else (None, None))
            snapshot, manifests = self._prepare_snapshot(base, delta, identifier, kind, log_offsets or {}, written,
                                                         log_pending, log_published, index, began_ms)
            if self.context.snapshots.try_publish(snapshot):
                self._may_have_committed = True
                log.info("table %s: committed snapshot %s (%s)", self.context.table_name, snapshot.id, kind.value)
                after = base.after(snapshot, manifests, delta.entries, vectors)
                views.publish(self.context, after)
                return CommitResult(snapshot.id, after)
            log.info("table %s: snapshot %s taken by another writer, retrying", self.context.table_name, snapshot.id)
            for path in written:
                self.context.io.delete(path)
            if not budget.retry():
                raise CommitRetriesExhaustedError(
                    f"table {self.context.table_name!r}: gave up after {budget.describe()}, other writers kept "
                    "committing first (nothing was committed; a retry is safe)"
                )

    def _build(
        self, messages: Sequence[CommitMessage], live: dict[tuple[Partition, int, str], ManifestEntry], overwrite: Overwrite
    ) -> _Delta:
        entries: list[ManifestEntry] = []
        added_rows = deleted_rows = 0
        new_partitions: set[Partition] = set()
        for m in messages:
            for f in m.added:
                entries.append(ManifestEntry(FileKind.ADD, m.partition, m.bucket, m.total_buckets, f))
                added_rows += f.row_count
                new_partitions.add(m.partition)
            for f in m.deleted:
                entries.append(ManifestEntry(FileKind.DELETE, m.partition, m.bucket, m.total_buckets, f))
                deleted_rows += f.row_count
        if overwrite is not None:
            keys = self.context.schema.partition_keys
            for e in live.values():
                if overwrite == "all":
                    hit = True
                elif overwrite == "dynamic":
                    hit = e.partition in new_partitions
                elif isinstance(overwrite, frozenset):
                    hit = e.partition in overwrite
                else:
                    values = dict(zip(keys, e.partition))
                    hit = all(values.get(k) == v for k, v in overwrite.items())  # type: ignore[union-attr]
                if hit:
                    entries.append(ManifestEntry(FileKind.DELETE, e.partition, e.bucket, e.total_buckets, e.file))
                    deleted_rows += e.file.row_count
        return _Delta(tuple(entries), added_rows, deleted_rows)

    def _validate(
        self, delta: _Delta, live: dict[tuple[Partition, int, str], ManifestEntry], kind: CommitKind
    ) -> None:
        """4. Every deleted file is live; appended files sort after every remaining live file of their bucket
        (else another writer's sequence numbers tie with ours: one update would be lost, or, without a primary
        key, counts would apply in no defined order; see filestore.countmerge)."""
        gone = [e.file.file_name for e in delta.entries if e.kind == FileKind.DELETE and e.identifier not in live]
        if gone:
            raise CommitConflictError(self.context.table_name, gone)
        if kind == CommitKind.COMPACT:
            return
        deleted = {e.identifier for e in delta.entries if e.kind == FileKind.DELETE}
        max_live: dict[tuple[Partition, int], int] = {}
        for ident, e in live.items():
            if ident not in deleted:
                where = (e.partition, e.bucket)
                max_live[where] = max(max_live.get(where, -1), e.file.max_sequence_number)
        tied = sorted({
            f"{'/'.join(e.partition) or '-'}:{e.bucket}"
            for e in delta.entries
            if e.kind == FileKind.ADD and e.file.min_sequence_number <= max_live.get((e.partition, e.bucket), -1)
        })
        if tied:
            raise SequenceConflictError(self.context.table_name, tied)

    def _validate_unchanged(self, delta: _Delta, planned_on: int, latest: Snapshot | None) -> None:
        """4. (A write planned on an older snapshot.) No APPEND or OVERWRITE snapshot after `planned_on` adds or
        deletes files in a (partition, bucket) this commit adds files to; a snapshot expired since counts as one
        that did (it cannot be checked). Compactions change no row and pass."""
        ours = {(e.partition, e.bucket) for e in delta.entries if e.kind == FileKind.ADD}
        if latest is None or not ours:
            return
        snapshots, manifests = self.context.snapshots, self.context.manifests
        for sid in range(planned_on + 1, latest.id + 1):
            if not snapshots.exists(sid):
                raise ConcurrentUpdateError(self.context.table_name, planned_on, sid, ["(expired)"])
            s = snapshots.get(sid)
            if s.commit_kind == CommitKind.COMPACT:
                continue
            touched = {(e.partition, e.bucket) for meta in manifests.read_manifest_list(s.delta_manifest_list)
                       for e in manifests.read_manifest(meta.file_name)} & ours
            if touched:
                raise ConcurrentUpdateError(self.context.table_name, planned_on, sid,
                                            sorted(f"{'/'.join(p) or '-'}:{b}" for p, b in touched))

    def _prepare_snapshot(
        self,
        base: LiveFiles,
        delta: _Delta,
        identifier: int,
        kind: CommitKind,
        log_offsets: Mapping[int, int],
        written: list[str],
        log_pending: bool = False,
        log_published: int | None = None,
        deletion_vectors: str | None = None,
        began_ms: int | None = None,
    ) -> tuple[Snapshot, tuple[ManifestFileMeta, ...]]:
        """5. The new manifests and the snapshot naming them; also every manifest the snapshot references. The paths
        written are appended to `written`; `began_ms`: when the commit was called (its duration is recorded)."""
        mio = self.context.manifests
        schema_id = self.context.schema.id
        latest = base.snapshot
        manifests: list[ManifestFileMeta] = list(base.manifests)
        if len(manifests) > self.context.options.manifest_merge_min_count:
            merged = mio.write_manifest(list(base.entries.values()), schema_id)  # full merge: only live ADDs remain
            written.append(self.context.paths.manifest_file(merged.file_name))
            manifests = [merged]
        delta_meta = mio.write_manifest(delta.entries, schema_id)
        written.append(self.context.paths.manifest_file(delta_meta.file_name))
        base_list = mio.write_manifest_list(manifests)
        written.append(self.context.paths.manifest_file(base_list))
        delta_list = mio.write_manifest_list([delta_meta])
        written.append(self.context.paths.manifest_file(delta_list))
        total = 0 if latest is None else latest.total_record_count
        offsets = dict(latest.log_offsets) if latest is not None else {}
        offsets.update(log_offsets)
        new_id = 1 if latest is None else latest.id + 1
        pending = tuple(p for p in (latest.log_pending if latest is not None else ()) if p != log_published)
        now_ms = int(time.time() * 1000)
        snapshot = Snapshot(
            id=new_id,
            schema_id=schema_id,
            base_manifest_list=base_list,
            delta_manifest_list=delta_list,
            commit_user=self.commit_user,
            commit_identifier=identifier,
            commit_kind=kind,
            time_millis=now_ms,
            total_record_count=total + delta.added_rows - delta.deleted_rows,
            delta_record_count=delta.added_rows - delta.deleted_rows,
            log_offsets=offsets,
            log_pending=pending + ((new_id,) if log_pending else ()),
            deletion_vectors=deletion_vectors,
            commit_duration_ms=None if began_ms is None else max(0, now_ms - began_ms),
        )
        return snapshot, (*manifests, delta_meta)
