"""Reading a table's changes: the hybrid `full` scan (snapshot, then the log from the snapshot's offsets),
`latest` and `from-timestamp`.

No duplicate, no gap for `full`: snapshot N's log-offset map holds, per bucket, the offset after the last change
N contains (written in the same commit, see tablestore.writer), so the log is read from exactly there.

What comes out of the log: for a primary-key table with `changelog.normalize` (the default), the changelog of its
commits, computed by tablestore.log_changes (the rule Spark's stream reader applies too): the log is read in
ranges up to its end (the last stable offset for transactional consistency) as a micro-batch stream would, each
range turned into changes with no state of its own. Otherwise the records as stored.

A consumer (`consumer_id`; filestore.consumers defines its offsets and what expiry keeps for it):
- When the consumer exists, the read resumes at its recorded log offsets, whatever `scan` says (no snapshot is
  read first, `timestamp_ms` is not used); when it does not, `scan` decides and the consumer is created.
- Its progress is the log offsets up to which every change was handed to the caller and processed: written (an
  atomic overwrite of its file) just before each batch is handed out, when a batch handed out before moved it (the
  caller asking for the next batch means it processed the previous ones), and once more when the iterator ends by
  itself (timeout or `max_records`), then also refreshing its update time. A batch is counted once the read knows
  the log offsets it covers: a normalized read advances per bucket range (its last batch), or with `max_records`
  per commit (each commit of a bucket read on its own, so the limit cuts one commit at most); a raw one per batch
  of records; a `full` scan's snapshot rows count once all of them were handed out (the consumer starts at the
  snapshot's offsets). Not written: when the caller stops iterating early (closes the iterator, breaks out of the
  loop) or on an error, nor for a batch cut short by `max_records`. So a consumer is at least once: what was
  handed out but not recorded (the rest of a commit the limit cut) is read again by the next read with the id.
"""
from __future__ import annotations

import logging
import time
from typing import Callable, Iterator, Optional, Sequence

import pyarrow as pa

from filestore import ConsumerManager, FileStore, Snapshot
from logstore import ROW_KIND_COLUMN, LogReader, LogStore, insert_kinds
from tablestore.errors import TableStoreError
from tablestore.log_changes import ChangeSource, CommitOffsets, commit_start, range_changes
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
    max_records: int | None, timeout_s: float, normalize: bool, consumer_id: str | None = None,
) -> Iterator[pa.RecordBatch]:
    """Check the arguments and pin where the changes start (the snapshot of `full`, the end offsets of `latest`,
    the offsets of `from-timestamp`) now, at the call: a `latest` reader sees every change committed after it was
    asked for, even those committed before it is first iterated. The batches come from the returned iterator.
    `normalize`: the changelog of the commits of a primary-key table (tablestore.log_changes). `consumer_id`: see
    the module's doc."""
    if log_store is None:
        raise TableStoreError(f"table {name!r} has no log store (log.system = none): read it with read()")
    options = log_store.options
    scan = scan or options.scan
    if scan not in SCANS:
        raise TableStoreError(f"table {name!r}: scan must be one of {SCANS}, not {scan!r}")
    consumers = ConsumerManager(store) if consumer_id is not None else None
    resumed = consumers.get(consumer_id) if consumers is not None and consumer_id is not None else None
    reader = log_store.new_reader()
    snapshot = None
    if resumed is not None:
        log.info("table %s: consumer %s resumes at offsets %s (scan %r not used)", name, consumer_id,
                 resumed.log_offsets, scan)
        start = {p: resumed.log_offsets.get(p, 0) for p in range(options.partitions)}
    elif scan == "full":
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
        if scan == "from-timestamp" and resumed is None:  # a start inside a commit reads that whole commit
            positions = {p: commit_start(store, p, o) for p, o in positions.items()}
        first = dict(positions)
        per_commit = consumer_id is not None and max_records is not None   # so the limit cuts one commit at most
        log_part = _normalized(source, reader, positions, timeout_s, per_commit)
    else:
        first = {p: max(o, 0) for p, o in start.items()}
        log_part = _raw(reader, start, timeout_s)
    progress = None
    if consumers is not None and consumer_id is not None:
        progress = _Progress(consumers, consumer_id, None if snapshot is not None else first,
                             None if resumed is None else dict(resumed.log_offsets))
    return _changes(_with_snapshot(read_batches, snapshot, first, log_part), limit, progress)


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


Item = tuple[Optional[pa.RecordBatch], Optional[dict[int, int]]]
"""A batch (None: none) and the log offsets every change is read up to once it and all before it are processed
(None: not known at this batch)."""


class _Progress:
    """A consumer's progress during one read (see the module's doc): `safe` = the offsets up to which everything
    handed out is processed, written when it moved (or when forced)."""

    def __init__(self, consumers: ConsumerManager, consumer_id: str, safe: dict[int, int] | None,
                 recorded: dict[int, int] | None) -> None:
        self.consumers, self.consumer_id, self.safe, self.recorded = consumers, consumer_id, safe, recorded

    def flush(self, *, force: bool = False) -> None:
        if self.safe is not None and (force or self.safe != self.recorded):
            self.consumers.record(self.consumer_id, self.safe)
            self.recorded = dict(self.safe)


def _with_snapshot(read_batches: ReadBatches, snapshot: Snapshot | None, start: dict[int, int],
                   log_part: Iterator[Item]) -> Iterator[Item]:
    """The snapshot's rows as +I (`full`), done once all are read (the log then starts at `start`), then the log."""
    if snapshot is not None:
        for batch in read_batches(snapshot_id=snapshot.id):
            yield _as_inserts(batch), None
        yield None, dict(start)
    yield from log_part


def _changes(items: Iterator[Item], limit: _Limit, progress: _Progress | None) -> Iterator[pa.RecordBatch]:
    for batch, after in items:
        if batch is not None:
            if limit.done:
                break
            taken = limit.take(batch)
            if taken.num_rows:
                if progress is not None:
                    progress.flush()   # the caller asked for this batch: those before are processed
                yield taken
            if taken.num_rows < batch.num_rows:   # cut short by max_records: its rest is not read
                break
        if progress is not None and after is not None:
            progress.safe = after
        if limit.done:
            break
    if progress is not None:
        progress.flush(force=True)


def _raw(reader: LogReader, start: dict[int, int], timeout_s: float) -> Iterator[Item]:
    """The log's records as stored from `start` on, each batch with the offsets read up to after it."""
    positions = {p: max(o, 0) for p, o in start.items()}
    for batch in reader.read(start, idle_timeout_s=timeout_s):
        positions.update(reader.positions)
        yield batch, dict(positions)


def _normalized(source: ChangeSource, reader: LogReader, positions: dict[int, int],
                timeout_s: float, per_commit: bool = False) -> Iterator[Item]:
    """The changes from `positions` on, one range per bucket up to the log's end at a time (`per_commit`: one
    commit at a time); stops once a range up to the end found at the start has been read and no record arrived for
    `timeout_s` seconds. A range's last batch (or None, when it has no change) carries the offsets read up to after
    it."""
    quiet_since = time.monotonic()
    while True:
        end = reader.start_at_end()
        ranges = {p: (o, end.get(p, o)) for p, o in positions.items() if end.get(p, o) > o}
        for p, (o1, o2) in sorted(ranges.items()):
            cuts = [o1, *_commit_offsets(source.store, p, o1, o2), o2] if per_commit else [o1, o2]
            for start, stop in zip(cuts, cuts[1:]):
                batches = [b for changes in range_changes(source, p, start, stop) for b in changes.to_batches()]
                positions[p] = stop
                for i, batch in enumerate(batches):
                    yield batch, (dict(positions) if i == len(batches) - 1 else None)
                if not batches:
                    yield None, dict(positions)
        if ranges:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= timeout_s:
            return
        else:
            time.sleep(_POLL_S)


def _commit_offsets(store: FileStore, bucket: int, start: int, end: int) -> list[int]:
    """The offsets in (start, end) of `bucket` where a commit starts (the snapshots' offsets)."""
    offsets = CommitOffsets(store, bucket)
    return offsets.between(offsets.last_at_or_below(start) or 0, start, end)
