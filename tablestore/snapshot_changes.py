"""The changes between two snapshots as a changelog: how a table without a log (`log.system` = none) is streamed, and
what the log of a table whose rows merge holds (tablestore.log_publish.log_changes).

For each (partition, bucket) whose live files differ between snapshot `a` (None: the empty table) and `b`, both
versions are merge-read and compared, vectorised (pyarrow joins). When `b` appends to its parent `a`, only the rows
of the keys its added files hold are read on both sides (`touched_keys`, FileStore.read_keys: files and row groups
that hold none of them are skipped), so a small commit into a large table reads little of it. The comparison:
- a primary-key table by key: a key only in `b` is `+I` (the new row), only in `a` is `-D` (the old row), in both
  with another value `-U` (old row) then `+U` (new row); an unchanged key is nothing;
- a table without a primary key as a multiset: a row whose count grew by n is n `+I`, shrank by n is n `-D`.
A COMPACT snapshot changes files but no rows: it yields nothing. Overwrites yield their real changes (the rows they
dropped as `-D`), unlike the log, which never sees an overwrite.
"""
from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import filestore
import logstore
from filestore import CommitKind, FileStore, LiveFiles, Snapshot, Split, pool
from tablestore.prepared import changes_of

_OLD, _NEW = "__old", "__new"


def _rows(store: FileStore, live: LiveFiles, where: tuple[tuple[str, ...], int], snapshot_id: int) -> pa.Table:
    files = tuple(e.file for e in live.entries.values() if (e.partition, e.bucket) == where)
    if not files:
        return store.schema.arrow_schema.empty_table()
    return store.new_read().read(Split(snapshot_id, where[0], where[1], files))


def _with_kind(table: pa.Table, kind: str) -> pa.Table:
    return table.add_column(0, logstore.ROW_KIND_COLUMN, pa.array([kind] * table.num_rows, pa.string()))


def _by_key(old: pa.Table, new: pa.Table, key: list[str]) -> pa.Table:
    names = old.schema.names
    values = [c for c in names if c not in key]
    left = old.rename_columns([c if c in key else c + _OLD for c in names]).append_column(
        _OLD, pa.array(np.ones(old.num_rows, dtype=bool)))
    right = new.rename_columns([c if c in key else c + _NEW for c in names]).append_column(
        _NEW, pa.array(np.ones(new.num_rows, dtype=bool)))
    joined = left.join(right, keys=key, join_type="full outer")
    in_old = pc.fill_null(joined.column(_OLD), False)
    in_new = pc.fill_null(joined.column(_NEW), False)
    same = pa.array(np.ones(joined.num_rows, dtype=bool))
    for c in values:
        a, b = joined.column(c + _OLD), joined.column(c + _NEW)
        equal = pc.fill_null(pc.equal(a, b), False)
        both_null = pc.and_(pc.is_null(a), pc.is_null(b))
        same = pc.and_(same, pc.or_(equal, both_null))

    def rows(side: str, mask: pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
        """One side's rows where `mask` holds (cast after the filter: the other side's nulls are gone then, so a
        NOT NULL value column casts)."""
        picked = joined.filter(mask)
        return pa.table({c: picked.column(c if c in key else c + side) for c in names}).cast(schema)

    inserted = pc.and_(in_new, pc.invert(in_old))
    deleted = pc.and_(in_old, pc.invert(in_new))
    changed = pc.and_(pc.and_(in_old, in_new), pc.invert(same))
    before, after = rows(_OLD, changed, old.schema), rows(_NEW, changed, new.schema)
    # -U then +U of each changed key, adjacent
    n = before.num_rows
    updates = pa.concat_tables([_with_kind(before, "-U"), _with_kind(after, "+U")])
    if n:
        order = np.empty(2 * n, dtype=np.int64)
        order[0::2], order[1::2] = np.arange(n), np.arange(n, 2 * n)
        updates = updates.take(pa.array(order))
    return pa.concat_tables([_with_kind(rows(_OLD, deleted, old.schema), "-D"), updates,
                             _with_kind(rows(_NEW, inserted, new.schema), "+I")])


def _as_multiset(old: pa.Table, new: pa.Table) -> pa.Table:
    """One group per distinct row (nulls group together, unlike a join's keys), summing -1 per old copy and +1
    per new copy."""
    names = old.schema.names
    delta = "__delta"
    both = pa.concat_tables([old.append_column(delta, pa.array(np.full(old.num_rows, -1, dtype=np.int64))),
                             new.append_column(delta, pa.array(np.ones(new.num_rows, dtype=np.int64)))])
    grouped = both.group_by(names, use_threads=False).aggregate([(delta, "sum")])
    counts = grouped.column(delta + "_sum").to_numpy()
    rows = grouped.select(names).cast(old.schema)
    take = np.repeat(np.arange(rows.num_rows), np.abs(counts))
    kinds = np.repeat(np.where(counts > 0, "+I", "-D"), np.abs(counts))
    out = rows.take(pa.array(take, pa.int64()))
    return out.add_column(0, logstore.ROW_KIND_COLUMN, pa.array(kinds.tolist(), pa.string()))


def snapshot_changes(store: FileStore, a: Snapshot | None, b: Snapshot) -> Iterator[pa.Table]:
    """The changelog from snapshot `a` to snapshot `b`, one table per (partition, bucket) that changed. When `b` is
    a compaction (it changes no row) there is none; when `b` appends to its parent `a`, only the keys of the files
    it adds can have changed, so only their rows are read (`touched_keys`)."""
    if b.commit_kind == CommitKind.COMPACT:
        return
    touched = None
    if a is not None and a.id == b.id - 1 and b.commit_kind == CommitKind.APPEND and store.schema.primary_keys:
        touched = touched_keys(store, b)
    for _, changes in bucket_changes(store, a, b, None if touched is None else touched.keys(), touched):
        yield changes


def snapshot_records(store: FileStore, a: Snapshot | None, b: Snapshot) -> Iterator[pa.Table]:
    """The records snapshot `b` wrote as its files store them (`changelog.normalize` = false on a table without a
    log): `+I` for each row written (an insert or an update: files keep no `+U`), `-D` for each delete, read from
    the files `b` adds alone, as an upsert-mode log holds them (tablestore.prepared.changes_of): no row before `b`
    is read. Only for an append to a primary-key table that keeps each key's newest row; otherwise (another merge
    engine, whose records are not rows; an overwrite, whose dropped rows no file records) the snapshot's changelog
    (`snapshot_changes`). A compaction wrote no record: nothing."""
    if b.commit_kind == CommitKind.COMPACT:
        return
    if not (store.schema.primary_keys and store.context.options.merge_engine.is_default
            and b.commit_kind == CommitKind.APPEND):
        yield from snapshot_changes(store, a, b)
        return
    for changes, _ in changes_of(store.context, filestore.added_by(store.context, b)):
        yield changes


def touched_keys(store: FileStore, snapshot: Snapshot, bucket: int | None = None
                 ) -> dict[tuple[tuple[str, ...], int], pa.Table]:
    """Per (partition, bucket) (in `bucket`, or all), the key columns of the files `snapshot` adds there: for a
    snapshot that appends to its parent, the only keys whose rows it can have changed (a delete is a record in an
    added file too)."""
    key = list(store.schema.primary_keys)
    added: dict[tuple[tuple[str, ...], int], list[pa.Table]] = {}
    for m in filestore.added_by(store.context, snapshot):
        if bucket is not None and m.bucket != bucket:
            continue
        added.setdefault((m.partition, m.bucket), []).extend(
            store.context.read_file(m.partition, m.bucket, f, key) for f in m.added)
    return {part: pa.concat_tables(tables) for part, tables in added.items() if tables}


def bucket_changes(store: FileStore, a: Snapshot | None, b: Snapshot,
                   where: Collection[tuple[tuple[str, ...], int]] | None = None,
                   touched: Mapping[tuple[tuple[str, ...], int], pa.Table] | None = None
                   ) -> Iterator[tuple[tuple[tuple[str, ...], int], pa.Table]]:
    """((partition, bucket), its changelog from `a` to `b`) for each one that changed, among `where` (None: all),
    the buckets computed in parallel on the file store's pool. `touched` (primary-key tables): per (partition,
    bucket), the only keys that can have changed (`touched_keys`): only their rows are read, at `a` and at `b`
    (FileStore.read_keys: files and row groups that hold none of them are skipped), and compared. A bucket that `b`
    only adds files to, in a table that keeps each key's newest row (the default merge engine), has those keys'
    rows at `b` in the added files alone (they sort after every older file: filestore.commit), so only they are read
    for `b`."""
    old_live, new_live = store.live_files(a), store.live_files(b)
    old_files: dict[tuple[tuple[str, ...], int], set[str]] = {}
    new_files: dict[tuple[tuple[str, ...], int], set[str]] = {}
    for live, files in ((old_live, old_files), (new_live, new_files)):
        for e in live.entries.values():
            if where is None or (e.partition, e.bucket) in where:
                files.setdefault((e.partition, e.bucket), set()).add(e.file.file_name)
    key = list(store.schema.primary_keys)
    newest_wins = store.context.options.merge_engine.is_default

    def compare(part: tuple[tuple[str, ...], int]) -> pa.Table:
        keys = touched.get(part) if touched is not None and key else None
        if keys is None:
            old = _rows(store, old_live, part, a.id if a is not None else 0)
            new = _rows(store, new_live, part, b.id)
            return _by_key(old, new, key) if key else _as_multiset(old, new)
        keys = keys.group_by(key, use_threads=False).aggregate([])
        before, after = old_files.get(part, set()), new_files.get(part, set())
        old = store.read_keys(old_live, keys, part)
        if newest_wins and before <= after:
            added = tuple(e.file for e in new_live.entries.values()
                          if (e.partition, e.bucket) == part and e.file.file_name not in before)
            new = store.new_read().read(Split(b.id, part[0], part[1],
                                              tuple(sorted(added, key=lambda f: f.min_sequence_number))))
        else:
            new = store.read_keys(new_live, keys, part)
        if len(key) > 1:  # the per-column key filter is a superset for a composite key
            old, new = (t.join(keys, keys=key, join_type="left semi", use_threads=False) for t in (old, new))
        return _by_key(old, new, key)

    parts = [part for part in sorted(set(old_files) | set(new_files)) if old_files.get(part) != new_files.get(part)]
    results = pool().map(compare, parts) if len(parts) > 1 else [compare(part) for part in parts]
    for part, changes in zip(parts, results):
        if changes.num_rows:
            yield part, changes
