"""Reading a table's changes: the hybrid `full` scan (snapshot, then the log from the snapshot's offsets),
`latest` and `from-timestamp`, with upsert-mode logs normalized by primary key.

No duplicate, no gap for `full`: snapshot N's log-offset map holds, per bucket, the offset after the last change
N contains (written in the same commit, see tablestore.writer), so the log is read from exactly there.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterator, Sequence

import pyarrow as pa

from filestore import FileStore, Snapshot
from logstore import ROW_KIND_COLUMN, LogReader, LogStore, insert_kinds
from tablestore.errors import TableStoreError
from tablestore.materializer.normalize_arrow import ArrowChangelogNormalizer

log = logging.getLogger(__name__)
SCANS = ("full", "latest", "from-timestamp")
ReadBatches = Callable[..., Iterator[pa.RecordBatch]]


def _as_inserts(batch: pa.RecordBatch) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([insert_kinds(batch.num_rows), *batch.columns],
                                      names=[ROW_KIND_COLUMN, *batch.schema.names])


def read_changes(
    name: str, store: FileStore, log_store: LogStore | None, read_batches: ReadBatches, *,
    schema: pa.Schema, primary_key: Sequence[str], scan: str | None, timestamp_ms: int | None,
    max_records: int | None, timeout_s: float,
) -> Iterator[pa.RecordBatch]:
    """Check the arguments and pin where the changes start (the snapshot of `full`, the end offsets of `latest`,
    the offsets of `from-timestamp`) now, at the call: a `latest` reader sees every change committed after it was
    asked for, even those committed before it is first iterated. The batches come from the returned iterator."""
    if log_store is None:
        raise TableStoreError(f"table {name!r} has no log store (log.system = none): read it with read()")
    options = log_store.options
    scan = scan or options.scan
    if scan not in SCANS:
        raise TableStoreError(f"table {name!r}: scan must be one of {SCANS}, not {scan!r}")
    reader = log_store.new_reader()
    snapshot = None
    if scan == "full":
        snapshot = store.snapshots.latest()
        start = reader.start_at_offsets(snapshot.log_offsets if snapshot else {})
    elif scan == "latest":
        start = reader.start_at_end()
    else:
        ts = timestamp_ms if timestamp_ms is not None else options.scan_timestamp_ms
        if ts is None:
            raise TableStoreError(f"table {name!r}: scan 'from-timestamp' needs timestamp_ms "
                                  "(or the option log.scan.timestamp-millis)")
        start = reader.start_at_timestamp(ts)
    normalizer = None
    if options.changelog_mode == "upsert":
        normalizer = ArrowChangelogNormalizer(schema, primary_key, generate_update_before=True)
    return _changes(read_batches, reader, start, snapshot, normalizer, max_records, timeout_s)


def _changes(
    read_batches: ReadBatches,
    reader: LogReader,
    start: dict[int, int],
    snapshot: Snapshot | None,
    normalizer: ArrowChangelogNormalizer | None,
    max_records: int | None,
    timeout_s: float,
) -> Iterator[pa.RecordBatch]:
    emitted = 0

    def emit(batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        nonlocal emitted
        if normalizer is not None:
            out = normalizer.process_batch(batch)
            batches = out.combine_chunks().to_batches() if out.num_rows else []
        else:
            batches = [batch]
        for b in batches:
            if max_records is not None and emitted + b.num_rows > max_records:
                b = b.slice(0, max_records - emitted)
            if b.num_rows:
                emitted += b.num_rows
                yield b

    if snapshot is not None:
        for batch in read_batches(snapshot_id=snapshot.id):
            yield from emit(_as_inserts(batch))
            if max_records is not None and emitted >= max_records:
                return
    for batch in reader.read(start, idle_timeout_s=timeout_s):
        yield from emit(batch)
        if max_records is not None and emitted >= max_records:
            return
