"""A primary-key table's changes from its log, commit by commit: the one owner of the rule that `Table.read_changes`
and the Spark stream reader (`readStream.format("managed")` and SQL `readStream.table`) apply, so all three give
the same changelog (`changelog.normalize` = true, the default).

The rule (FLIP-188's full changelog), per bucket b, whatever `log.changelog-mode` and `log.consistency` are:
1. Commits are delimited in partition b of the topic by the offsets the snapshots record: `log_offsets[b]` of a
   snapshot is the offset after the last record of b its commit wrote (tablestore.writer, steps 2-3), so the
   records of one commit lie between the offsets of two consecutive snapshots. Records after the latest
   snapshot's offset (eventual consistency makes them visible before their snapshot) count as one more commit.
2. Within a commit, a key's records collapse to its last one: an addition (+I/+U: the key's row is now this) or a
   retraction (-U/-D: the key is gone). That is compared with the key's row before the commit: a new key gives
   `+I` (new row), a changed row `-U` (old row) then `+U` (new row), a deleted key `-D` (old row); an unchanged row
   gives nothing, and so does a key absent before and after (inserted and deleted within the commit).

How the changes of the log range [o1, o2) of bucket b are computed with no state kept from earlier ranges (Spark
runs each micro-batch's `read` in a worker that keeps nothing; a restart from a checkpoint reads the same ranges
again and gets the same changes). The table itself is each key's state at every snapshot:
1. S = the latest snapshot whose offset for b is at most o1 (before the first snapshot: the empty table at offset
   0), or the one before a commit up to it whose log was lost and produced again later (`CommitOffsets.base`);
   ChangesExpiredError when it has expired.
2. The records [S.offset_b, o2) of partition b are read with their offsets (logstore.LogReader.read_partition).
3. The rows at S of the keys in those records: one merge read of bucket b at S, filtered on the key columns (a key
   filter is applied below the merge, by the Parquet reader: filestore.read), seed the normalizer
   (tablestore.materializer.normalize_arrow.ArrowChangelogNormalizer, whose per-row rules are rule 2's).
4. The records are cut into commits at o1 and at the snapshot offsets between o1 and o2, and each commit's records
   collapse to the last one per key. Those before o1 update the state silently (a range starts inside a commit
   only where a reader asked for it: a `from-timestamp` start is moved back to its commit's start, `commit_start`);
   those of [o1, o2) go through the normalizer in one batch, commit after commit: a key's previous row is its row
   in an earlier commit of the batch, else the seeded one, so the output is each commit's changes in turn.
Everything on the data path is vectorised: key bytes (filestore.KeyCodec) → one code per key → numpy → Arrow
takes. What is not covered: an INSERT OVERWRITE changes the file store but not the log, so a range after one is
compared with the overwritten rows (as a snapshot diff would); a commit whose log transaction was lost and
produced again later (`TableWriter.recover_log`) reads where its records landed, after any commit made in between
(as in the log itself).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore import CommitKind, FileStore, KeyCodec, Snapshot, SnapshotNotFoundError
from logstore import LOG_OFFSET_COLUMN, LogStore
from tablestore.errors import ChangesExpiredError
from tablestore.materializer.normalize_arrow import ArrowChangelogNormalizer


@dataclass(frozen=True)
class ChangeSource:
    """What reading a table's changes needs, as values: its name, schema, primary key, file store and log."""

    name: str
    schema: pa.Schema
    primary_key: tuple[str, ...]
    store: FileStore
    log: LogStore


class CommitOffsets:
    """The offsets of one bucket the retained snapshots record, read lazily (a snapshot file at most once).
    Snapshot 0 is the empty table before the first snapshot, at offset 0. A bucket's offset never decreases from
    one snapshot to the next, so searches are binary."""

    def __init__(self, store: FileStore, bucket: int) -> None:
        self._snapshots = store.snapshots
        self.bucket = bucket
        self.earliest = self._snapshots.earliest_id()
        self.latest = self._snapshots.latest_id()
        self._cache: dict[int, Snapshot] = {}

    def snapshot(self, snapshot_id: int) -> Snapshot:
        if snapshot_id not in self._cache:
            self._cache[snapshot_id] = self._snapshots.get(snapshot_id)
        return self._cache[snapshot_id]

    def of(self, snapshot_id: int) -> int:
        return 0 if snapshot_id == 0 else self.snapshot(snapshot_id).log_offsets.get(self.bucket, 0)

    def last_at_or_below(self, offset: int) -> int | None:
        """The latest snapshot whose offset is at most `offset` (0: the empty table), or None when that one has
        expired."""
        if self.earliest is None or self.latest is None:
            return 0
        if self.of(self.earliest) > offset:
            return 0 if self.earliest == 1 else None
        lo, hi = self.earliest, self.latest  # invariant: of(lo) <= offset
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.of(mid) <= offset:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def first_above(self, offset: int) -> int | None:
        """The offset of the first snapshot whose offset is above `offset`, or None."""
        if self.latest is None or self.of(self.latest) <= offset:
            return None
        below = self.last_at_or_below(offset)
        lo = max(below or 0, (self.earliest or 1) - 1) + 1
        hi = self.latest  # invariant: of(hi) > offset
        while lo < hi:
            mid = (lo + hi) // 2
            if self.of(mid) > offset:
                hi = mid
            else:
                lo = mid + 1
        return self.of(hi)

    def base(self, start: int, end: int) -> int | None:
        """The snapshot whose rows are the state of a range [start, end)'s keys before it: the latest one at or
        before `start`, unless the log of a commit up to it was lost and produced again after it (a crash
        between steps 3 and 4 of the commit protocol, repaired by `TableWriter.recover_log` with a log-only
        snapshot of the same commit user and identifier): the log holds that commit's records only from there
        on, so the state is the table's before that commit. Likewise for a commit whose log was still pending at
        that snapshot (`Snapshot.log_pending`: produced by the executors after the snapshot, its records lie after
        the snapshot's offsets). None when the snapshot needed has expired."""
        base = self.last_at_or_below(start)
        if base:   # commits whose log was pending then have records after its offsets: the state before them
            pending = self.snapshot(base).log_pending
            if pending:
                before = min(pending) - 1
                base = before if before == 0 or before >= (self.earliest or 1) else None
        sid = max(base or 0, (self.earliest or 1) - 1) + 1
        while base is not None and sid <= (self.latest or 0):
            lost = self._lost_commit(sid)
            if lost is not None and lost <= base:  # look again after the earlier base
                base = lost - 1 if lost - 1 == 0 or lost - 1 >= (self.earliest or 1) else None
                sid = lost
            elif self.of(sid) >= end:
                break
            sid += 1
        return base

    def _lost_commit(self, snapshot_id: int) -> int | None:
        """The commit whose log `snapshot_id` produced again for this bucket, if it is such a log-only snapshot."""
        s = self.snapshot(snapshot_id)
        if s.commit_kind != CommitKind.COMPACT or s.delta_record_count != 0 or snapshot_id - 1 < (self.earliest or 1):
            return None
        if self.of(snapshot_id - 1) == self.of(snapshot_id):
            return None
        for sid in range(snapshot_id - 1, (self.earliest or 1) - 1, -1):
            found = self.snapshot(sid)
            if (found.commit_user, found.commit_identifier) == (s.commit_user, s.commit_identifier) and (
                    found.commit_kind != CommitKind.COMPACT):
                return sid
        return None

    def between(self, after_snapshot: int, low: int, high: int) -> list[int]:
        """The distinct offsets in (low, high) of the snapshots after `after_snapshot`, ascending."""
        found: list[int] = []
        for sid in range(max(after_snapshot + 1, self.earliest or 1), (self.latest or 0) + 1):
            offset = self.of(sid)
            if offset >= high:
                break
            if offset > low and (not found or offset > found[-1]):
                found.append(offset)
        return found


def commit_start(store: FileStore, bucket: int, offset: int) -> int:
    """`offset` moved back to the start of the commit it falls in (the offset of the latest snapshot below it),
    when a snapshot has published that commit; unchanged otherwise: at a commit's start, in records no snapshot
    covers yet, or when the snapshot before it has expired (reading from there then fails, naming it)."""
    offsets = CommitOffsets(store, bucket)
    snapshot = offsets.last_at_or_below(offset)
    if snapshot is None or offsets.of(snapshot) == offset or offsets.first_above(offset) is None:
        return offset
    return offsets.of(snapshot)


def commit_end(store: FileStore, bucket: int, start: int, capped: int, end: int) -> int:
    """Where a read of [start, end) limited to `capped` stops so it ends on a commit boundary: the last snapshot
    offset in (start, capped], else the first one in (start, end] (a commit is never split), else `end` (records
    no snapshot covers yet are one commit)."""
    if capped >= end:
        return end
    offsets = CommitOffsets(store, bucket)
    below = offsets.last_at_or_below(capped)
    if below is not None and offsets.of(below) > start:
        return offsets.of(below)
    above = offsets.first_above(start)
    return above if above is not None and above <= end else end


def range_changes(source: ChangeSource, bucket: int, start: int, end: int) -> Iterator[pa.Table]:
    """The changes of the log records [start, end) of `bucket` (`_row_kind` + the table's columns), in commit
    order (see the module docstring)."""
    if end <= start:
        return
    offsets = CommitOffsets(source.store, bucket)
    base = offsets.base(start, end)
    if base is None:
        raise ChangesExpiredError(source.name, bucket, None, offsets.earliest, offset=start)
    batches = list(source.log.new_reader().read_partition(bucket, offsets.of(base), end))
    if not batches:
        return
    records = pa.Table.from_batches(batches)
    state = _rows_at(source, base, bucket, records)
    changes = commit_changes(source.schema, source.primary_key, records, state,
                             [start, *offsets.between(base, start, end)])
    if changes.num_rows:
        yield changes


def commit_changes(schema: pa.Schema, primary_key: Sequence[str], records: pa.Table, state: pa.Table,
                   cuts: Sequence[int]) -> pa.Table:
    """The changes of the log `records` (`_row_kind`, the table's columns, `_log_offset`; in offset order) from
    the rows `state` (the table's rows of their keys before the first record): `cuts` are the offsets where
    commits start, the first one where the changes start (the records before it only update the state). Pure:
    no I/O."""
    positions = records.column(LOG_OFFSET_COLUMN).to_numpy()
    records = records.drop_columns([LOG_OFFSET_COLUMN])
    normalizer = ArrowChangelogNormalizer(schema, primary_key)
    normalizer.seed(state)
    commits = np.searchsorted(np.asarray(cuts, np.int64), positions, side="right")  # 0: before the first cut
    key_codec = KeyCodec([schema.field(k).type for k in primary_key])
    last = last_per_commit_and_key(records, commits, primary_key, key_codec)
    replayed = int(np.searchsorted(commits[last], 1))  # `last` keeps the commit order
    if replayed:
        normalizer.process_batch(records.take(pa.array(last[:replayed])))
    return normalizer.process_batch(records.take(pa.array(last[replayed:])))


def last_per_commit_and_key(records: pa.Table, commits: np.ndarray, key: Sequence[str],
                            key_codec: KeyCodec) -> np.ndarray:
    """The positions of the last record of each key within each commit (`commits`: the commit of each record,
    non-decreasing), ascending."""
    n = records.num_rows
    codes = pc.dictionary_encode(key_codec.encode_columns([records.column(k) for k in key])).indices
    keys = codes.to_numpy(zero_copy_only=False).astype(np.int64)
    combined = commits.astype(np.int64) * (int(keys.max(initial=0)) + 1) + keys
    _, first_from_end = np.unique(combined[::-1], return_index=True)
    return np.sort(n - 1 - first_from_end)


def _rows_at(source: ChangeSource, snapshot_id: int, bucket: int, records: pa.Table) -> pa.Table:
    """The rows of bucket `bucket` at snapshot `snapshot_id` (0: the empty table) whose keys are among those of
    `records`, plus possibly a few others (the filter is per key column, so for a composite key it is a
    superset): a merge read filtered on the key columns."""
    schema = source.store.schema.arrow_schema
    if snapshot_id == 0 or records.num_rows == 0:
        return schema.empty_table()
    try:
        snapshot = source.store.snapshots.get(snapshot_id)
    except SnapshotNotFoundError:
        raise ChangesExpiredError(source.name, bucket, snapshot_id, source.store.snapshots.earliest_id()) from None
    return source.store.read_keys(source.store.live_files(snapshot), records, (None, bucket))
