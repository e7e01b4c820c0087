"""Reading a table's changes from its topic as Arrow batches with a `_row_kind` column.

Start positions: explicit offsets per partition (a snapshot's log offsets, for the hybrid `full` scan), the end
(`latest`; with read_committed that is the last stable offset), or the first offset at or after a timestamp
(Kafka's offsets-for-times). Ends and timestamps are resolved to concrete offsets when asked, never left to the
consumer as OFFSET_END: that would be resolved at its first fetch and skip what was produced in between.
Reading stops after `max_records` rows or when no record arrived for `idle_timeout_s`; a record is handed on as
soon as it arrives (the poll loop never holds arrived records back to fill a batch).
Positions are the reader's own (never committed to a consumer group): `positions` tells where to resume.

What comes out is a valid changelog for the topic's changelog mode (row kinds checked by logstore.changes):
- `all`: every change as written (+I, -U, +U, -D);
- `upsert`: an upsert stream keyed by the primary key: +I/+U (the row is now this) and -D (may carry only the key),
  never -U (an UPDATE_BEFORE a foreign producer wrote, e.g. a Debezium "u" event, is dropped: the +U after it
  says the same). Turning it into a full changelog takes per-key state: `tablestore` normalizes it.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, TopicPartition

from logstore.changes import ROW_KIND_COLUMN, RowKind, check_row_kinds
from logstore.errors import LogRecordsExpiredError, LogStoreError
from logstore.formats.base import FormatBase, MessageRef
from logstore.kafka import KafkaAdmin, LogStoreUnavailableError, consumer_config
from logstore.options import LogStoreOptions

log = logging.getLogger(__name__)
LOG_OFFSET_COLUMN = "_log_offset"
"""The column `read_partition` adds: each row's record offset in its partition (not on the wire)."""


class LogReader:
    def __init__(self, options: LogStoreOptions, value_format: FormatBase) -> None:
        self.options = options
        self.value_format = value_format
        # eventual consistency makes records visible before their commit: read them uncommitted
        self.read_committed = options.consistency == "transactional"
        self.positions: dict[int, int] = {}
        self._admin = KafkaAdmin(options.properties, options.request_timeout_s)  # connects at its first call

    def _consumer(self) -> Consumer:
        return Consumer(consumer_config(self.options.properties, self.read_committed))

    def start_at_offsets(self, offsets: Mapping[int, int]) -> dict[int, int]:
        """Every partition from `offsets`, or from its beginning when absent."""
        return {p: offsets.get(p, OFFSET_BEGINNING) for p in range(self.options.partitions)}

    def read_range(self, start: Mapping[int, int], end: Mapping[int, int]) -> Iterator[pa.RecordBatch]:
        """The changes at offsets [start[p], end[p]) of each partition p (a bounded, repeatable read: `end` at or
        below the last stable offset for read_committed, e.g. from `list_offsets`)."""
        for batch, _ in self._bounded(start, end, strict=False):
            yield batch

    def read_partition(self, partition: int, start: int, end: int) -> Iterator[pa.RecordBatch]:
        """The changes at offsets [start, end) of `partition`, each row with its record's offset in a last column
        `_log_offset` (int64; the rows of one record, e.g. a Debezium update's -U and +U, share it), in offset
        order. Strict: LogRecordsExpiredError when the topic no longer holds `start` (retention deleted it), where
        `read_range` would quietly start at the oldest record left."""
        for batch, offsets in self._bounded({partition: start}, {partition: end}, strict=True):
            yield batch.append_column(LOG_OFFSET_COLUMN, pa.array(offsets, pa.int64()))

    def _bounded(self, start: Mapping[int, int], end: Mapping[int, int], *,
                 strict: bool) -> Iterator[tuple[pa.RecordBatch, np.ndarray]]:
        """Each decoded batch of [start, end) with the offset of each of its rows."""
        topic = self.options.topic
        todo = {p: o for p, o in start.items() if end.get(p, 0) > o}
        if not todo:
            return
        consumer = self._consumer()
        try:
            for p, o in todo.items() if strict else ():
                try:
                    low, _ = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                            timeout=self.options.request_timeout_s)
                except KafkaException as e:
                    raise LogStoreUnavailableError(f"topic {topic!r} partition {p}: no offsets in time: {e}") from None
                if low > o:
                    raise LogRecordsExpiredError(topic, p, o, low)
            consumer.assign([TopicPartition(topic, p, o) for p, o in todo.items()])
            deadline = time.monotonic() + max(30.0, 3 * self.options.request_timeout_s)
            while todo:
                if time.monotonic() > deadline:
                    raise LogStoreUnavailableError(
                        f"topic {topic!r}: could not read offsets {dict(start)} to {dict(end)} in time")
                messages = consumer.consume(num_messages=5000, timeout=0.1)
                good = []
                for m in messages:
                    partition, offset = m.partition(), m.offset()
                    if m.error() is not None or partition is None or offset is None:
                        raise LogStoreError(f"topic {topic!r} partition {partition}: {m.error()}")
                    if offset < end[partition]:
                        good.append(m)
                if good:
                    decoded = self.value_format.decode_batch(
                        [m.value() for m in good], [m.key() for m in good],
                        [MessageRef(topic, m.partition(), m.offset()) for m in good])
                    offsets = np.fromiter((m.offset() for m in good), np.int64, len(good))[decoded.messages]
                    batch, kept = self._as_changelog(decoded.batch)
                    if kept is not None:
                        offsets = offsets[kept]
                    if batch.num_rows:
                        yield batch, offsets
                positions = consumer.position([TopicPartition(topic, p) for p in todo])
                for tp in positions:
                    if tp.offset >= end[tp.partition]:
                        todo.pop(tp.partition, None)
        finally:
            consumer.close()

    def holds(self, partition: int, offset: int) -> bool:
        """Whether this reader sees the record at `offset` of `partition` (for read_committed: whether its
        transaction committed). Ask only once the transaction is settled (its producer's transactional id was
        started again, or it committed/aborted): an open one would keep the answer waiting until the timeout,
        then LogStoreUnavailableError."""
        topic = self.options.topic
        consumer = self._consumer()
        tp = TopicPartition(topic, partition, offset)
        consumer.assign([tp])
        deadline = time.monotonic() + self.options.request_timeout_s
        try:
            while time.monotonic() < deadline:
                m = consumer.poll(0.1)
                if m is not None:
                    if m.error() is not None:
                        raise LogStoreError(f"topic {topic!r} partition {partition}: {m.error()}")
                    return bool(m.offset() == offset)
                position = consumer.position([TopicPartition(topic, partition)])[0].offset
                if position > offset:  # skipped: aborted (or deleted by retention)
                    return False
        finally:
            consumer.close()
        raise LogStoreUnavailableError(
            f"topic {topic!r} partition {partition}: could not tell within {self.options.request_timeout_s:.0f} s "
            f"whether offset {offset} is committed")

    def start_at_end(self) -> dict[int, int]:
        """Every partition from its end now (the last stable offset when reading committed)."""
        return self._admin.list_offsets(
            self.options.topic, self.options.partitions, timestamp_ms=None, read_committed=self.read_committed)

    def start_at_timestamp(self, timestamp_ms: int) -> dict[int, int]:
        """Every partition from its first record at or after `timestamp_ms` (Kafka's offsets-for-times), or from
        its end now when it has none."""
        return self._admin.list_offsets(
            self.options.topic, self.options.partitions, timestamp_ms=timestamp_ms,
            read_committed=self.read_committed)

    def read(
        self, start: Mapping[int, int], *, max_records: int | None = None, idle_timeout_s: float = 2.0
    ) -> Iterator[pa.RecordBatch]:
        """Changes from `start` on. Stops after `max_records` rows, or once it has read everything the topic held
        when it began AND nothing more arrived for `idle_timeout_s` (a slow first fetch never cuts the existing
        records short). If it cannot catch up, it stops after `max(idle_timeout_s, request timeout)` without any
        record: an error-free end, never a hang."""
        topic = self.options.topic
        ends = self._admin.list_offsets(topic, self.options.partitions, timestamp_ms=None,
                                  read_committed=self.read_committed)
        consumer = self._consumer()
        consumer.assign([TopicPartition(topic, p, o) for p, o in start.items()])
        self.positions = {p: o for p, o in start.items() if o >= 0}
        owed = [TopicPartition(topic, p) for p, o in start.items() if ends.get(p, 0) > max(o, 0)]  # unread records
        stall_limit = max(idle_timeout_s, self.options.request_timeout_s)
        emitted = 0
        last_data = time.monotonic()

        def caught_up() -> bool:
            nonlocal owed
            if owed:  # positions move past transaction markers too, so `end` is reachable
                owed = [tp for tp in consumer.position(owed) if tp.offset < ends[tp.partition]]
            return not owed

        try:
            while max_records is None or emitted < max_records:
                # what has arrived, without waiting; else wait for the first record only: `consume` with a
                # timeout would hold arrived records until it has 5000 or the timeout passes (latency)
                messages = consumer.consume(num_messages=5000, timeout=0)
                if not messages:
                    first = consumer.poll(0.05)
                    if first is None:
                        quiet = time.monotonic() - last_data
                        if quiet >= idle_timeout_s and (quiet >= stall_limit or caught_up()):
                            return
                        continue
                    messages = [first, *consumer.consume(num_messages=4999, timeout=0)]
                last_data = time.monotonic()
                good = []
                for m in messages:
                    err = m.error()
                    if err is not None:
                        raise LogStoreError(f"topic {topic!r} partition {m.partition()}: {err}")
                    good.append(m)
                decoded = self.value_format.decode_batch(
                    [m.value() for m in good],
                    [m.key() for m in good],
                    [MessageRef(topic, m.partition(), m.offset()) for m in good],
                )
                for m in good:
                    partition, offset = m.partition(), m.offset()
                    if partition is not None and offset is not None:
                        self.positions[partition] = offset + 1
                batch, _ = self._as_changelog(decoded.batch)
                if max_records is not None and emitted + batch.num_rows > max_records:
                    batch = batch.slice(0, max_records - emitted)
                if batch.num_rows:
                    emitted += batch.num_rows
                    yield batch
        finally:
            consumer.close()

    def _as_changelog(self, batch: pa.RecordBatch) -> tuple[pa.RecordBatch, np.ndarray | None]:
        """The decoded batch as a valid changelog of the topic's mode (see the module docstring), and which rows
        were kept (None: all)."""
        kinds = batch.column(ROW_KIND_COLUMN)
        check_row_kinds(kinds, table=self.options.topic)
        if self.options.changelog_mode == "upsert" and batch.num_rows:
            before = pc.equal(kinds, RowKind.UPDATE_BEFORE.value)
            if pc.any(before).as_py():
                keep = pc.invert(before)
                return batch.filter(keep), np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)
        return batch, None
