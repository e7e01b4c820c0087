"""Reading a table's changes: the hybrid `full` scan (snapshot, then the log from the snapshot's offsets),
`latest` and `from-timestamp`.

No duplicate, no gap for `full`: snapshot N's log-offset map holds, per bucket, the offset after the last change
N contains (written in the same commit, see tablestore.writer), so the log is read from exactly there.

What comes out of the log: for a primary-key table with `changelog.normalize` (the default), the changelog of its
commits, computed by tablestore.log_changes (the rule Spark's stream reader applies too): the log is read in
ranges up to its end (the last stable offset for transactional consistency) as a micro-batch stream would, each
range turned into changes with no state of its own. Otherwise the records as stored.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from filestore import FileStore, Snapshot
from logstore import ROW_KIND_COLUMN, LogReader, LogStore, insert_kinds
from tablestore.errors import TableStoreError
from tablestore.log_changes import ChangeSource, commit_start, range_changes
from tablestore.log_publish import handover_snapshot

log = logging.getLogger(__name__)
SCANS = ("full", "latest", "from-timestamp")
ReadBatches = Callable[..., Iterator[pa.RecordBatch]]
_POLL_S = 0.05
"""How long a normalized reader waits before it asks for the log's end again, once it has caught up."""


def _as_inserts(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([insert_kinds(batch.num_rows), *batch.columns],
                                      names=[ROW_KIND_COLUMN, *batch.schema.names])


def read_changes(
    name: str, store: FileStore, log_store: LogStore | None, read_batches: ReadBatches, *,
    schema: pa.Schema, primary_key: Sequence[str], scan: str | None, timestamp_ms: int | None,
    max_records: int | None, timeout_s: float, normalize: bool,
) -> Iterator[pa.RecordBatch]:
    """Check the arguments and pin where the changes start (the snapshot of `full`, the end offsets of `latest`,
    the offsets of `from-timestamp`) now, at the call: a `latest` reader sees every change committed after it was
    asked for, even those committed before it is first iterated. The batches come from the returned iterator.
    `normalize`: the changelog of the commits of a primary-key table (tablestore.log_changes)."""
    if log_store is None:
        raise TableStoreError(f"table {name!r} has no log store (log.system = none): read it with read()")
    options = log_store.options
    scan = scan or options.scan
    if scan not in SCANS:
        raise TableStoreError(f"table {name!r}: scan must be one of {SCANS}, not {scan!r}")
    reader = log_store.new_reader()
    snapshot = None
    if scan == "full":
        snapshot = handover_snapshot(store)   # before any snapshot whose log is still being produced
        start = reader.start_at_offsets(snapshot.log_offsets if snapshot else {})
    elif scan == "latest":
        start = reader.start_at_end()
    else:
        ts = timestamp_ms if timestamp_ms is not None else options.scan_timestamp_ms
        if ts is None:
            raise TableStoreError(f"table {name!r}: scan 'from-timestamp' needs timestamp_ms "
                                  "(or the option log.scan.timestamp-millis)")
        start = reader.start_at_timestamp(ts)
    limit = _Limit(max_records)
    if normalize and primary_key:
        source = ChangeSource(name, schema, tuple(primary_key), store, log_store)
        positions = {p: max(o, 0) for p, o in start.items()}
        if scan == "from-timestamp":  # a start inside a commit reads that whole commit
            positions = {p: commit_start(store, p, o) for p, o in positions.items()}
        log_part = _normalized(source, reader, positions, timeout_s)
    else:
        log_part = reader.read(start, idle_timeout_s=timeout_s)
    return _changes(read_batches, snapshot, log_part, limit)


class _Limit:
    """At most `max_records` rows in all (None: no limit)."""

    def __init__(self, max_records: int | None) -> None:
        self.left = max_records

    def take(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if self.left is not None:
            batch = batch.slice(0, self.left)
            self.left -= batch.num_rows
        return batch

    @property
    def done(self) -> bool:
        return self.left is not None and self.left <= 0


def _changes(read_batches: ReadBatches, snapshot: Snapshot | None, log_part: Iterator[pa.RecordBatch],
             limit: _Limit) -> Iterator[pa.RecordBatch]:
    if snapshot is not None:
        for batch in read_batches(snapshot_id=snapshot.id):
            if limit.done:
                return
            batch = limit.take(_as_inserts(batch))
            if batch.num_rows:
                yield batch
    for batch in log_part:
        if limit.done:
            return
        batch = limit.take(batch)
        if batch.num_rows:
            yield batch
        if limit.done:
            return


def _normalized(source: ChangeSource, reader: LogReader, positions: dict[int, int],
                timeout_s: float) -> Iterator[pa.RecordBatch]:
    """The changes from `positions` on, one range per bucket up to the log's end at a time; stops once a range
    up to the end found at the start has been read and no record arrived for `timeout_s` seconds."""
    quiet_since = time.monotonic()
    while True:
        end = reader.start_at_end()
        ranges = {p: (o, end.get(p, o)) for p, o in positions.items() if end.get(p, o) > o}
        for p, (o1, o2) in sorted(ranges.items()):
            for changes in range_changes(source, p, o1, o2):
                yield from changes.to_batches()
            positions[p] = o2
        if ranges:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= timeout_s:
            return
        else:
            time.sleep(_POLL_S)
