"""Reading a table's changes from its topic as Arrow batches with a `_row_kind` column.

Start positions: explicit offsets per partition (a snapshot's log offsets, for the hybrid `full` scan), the end
(`latest`; with read_committed that is the last stable offset), or the first offset at or after a timestamp
(Kafka's offsets-for-times). Reading stops after `max_records` rows or when no record arrived for `idle_timeout_s`.
Positions are the reader's own (never committed to a consumer group): `positions` tells where to resume.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping

import pyarrow as pa
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, TopicPartition

from logstore.errors import LogStoreError
from logstore.formats.base import FormatBase, MessageRef
from logstore.kafka import KafkaAdmin, consumer_config
from logstore.options import LogStoreOptions

log = logging.getLogger(__name__)


class LogReader:
    def __init__(self, options: LogStoreOptions, value_format: FormatBase) -> None:
        self.options = options
        self.value_format = value_format
        # eventual consistency makes records visible before their commit: read them uncommitted
        self.read_committed = options.consistency == "transactional"
        self.positions: dict[int, int] = {}

    def _consumer(self) -> Consumer:
        return Consumer(consumer_config(self.options.properties, self.read_committed))

    def start_at_offsets(self, offsets: Mapping[int, int]) -> dict[int, int]:
        """Every partition from `offsets`, or from its beginning when absent."""
        return {p: offsets.get(p, OFFSET_BEGINNING) for p in range(self.options.partitions)}

    def start_at_end(self) -> dict[int, int]:
        return {p: OFFSET_END for p in range(self.options.partitions)}

    def start_at_timestamp(self, timestamp_ms: int) -> dict[int, int]:
        KafkaAdmin(self.options.properties, self.options.request_timeout_s).ping()
        consumer = self._consumer()
        try:
            found = consumer.offsets_for_times(
                [TopicPartition(self.options.topic, p, timestamp_ms) for p in range(self.options.partitions)],
                timeout=self.options.request_timeout_s,
            )
        except KafkaException as e:
            raise LogStoreError(f"topic {self.options.topic!r}: offsets for timestamp {timestamp_ms}: {e}") from None
        finally:
            consumer.close()
        return {tp.partition: (tp.offset if tp.offset >= 0 else OFFSET_END) for tp in found}

    def read(
        self, start: Mapping[int, int], *, max_records: int | None = None, idle_timeout_s: float = 2.0
    ) -> Iterator[pa.RecordBatch]:
        KafkaAdmin(self.options.properties, self.options.request_timeout_s).ping()
        topic = self.options.topic
        consumer = self._consumer()
        consumer.assign([TopicPartition(topic, p, o) for p, o in start.items()])
        self.positions = {p: o for p, o in start.items() if o >= 0}
        emitted = 0
        last_data = time.monotonic()
        try:
            while max_records is None or emitted < max_records:
                messages = consumer.consume(num_messages=5000, timeout=0.05)
                if not messages:
                    if time.monotonic() - last_data >= idle_timeout_s:
                        return
                    continue
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
                    self.positions[m.partition()] = m.offset() + 1
                batch = decoded.batch
                if max_records is not None and emitted + batch.num_rows > max_records:
                    batch = batch.slice(0, max_records - emitted)
                if batch.num_rows:
                    emitted += batch.num_rows
                    yield batch
        finally:
            consumer.close()
