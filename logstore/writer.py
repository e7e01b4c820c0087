"""Writing a table's changes to its topic: one record per change, Kafka partition = the row's file-store bucket
(the caller passes the bucket numbers; the log store never hashes on its own).

Transactional consistency is a state machine (one Kafka transaction per file-store commit):
    IDLE --write--> OPEN --prepare--> PREPARED --commit--> IDLE
                      \\______________________--abort--> IDLE
1. `write` begins a transaction on the first change and produces into it (invisible to read_committed readers);
2. `prepare` flushes and returns, per partition, the offset after this transaction's last record: the file store
   stores these in the snapshot of the same commit;
3. the caller commits the file-store snapshot, then calls `commit` (the records become visible), or `abort`.
Eventual consistency has no transaction: records are visible as soon as they are flushed; `prepare` flushes,
`commit` is a no-op, and duplicates after a failure are deduplicated by key downstream.
"""
from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import KafkaException, Producer, TopicPartition

from logstore.changes import ROW_KIND_COLUMN, RowKind
from logstore.errors import LogStoreError
from logstore.formats.base import FormatBase, KeyFormat
from logstore.kafka import LogStoreUnavailableError, group_consumer, producer_config
from logstore.options import LogStoreOptions

log = logging.getLogger(__name__)


def _connect(producer: Producer, topic: str, timeout_s: float) -> None:
    """Return once `producer` holds a connection to a broker named by the cluster's metadata, so that
    `init_transactions` finds the transaction coordinator at once. librdkafka drops its bootstrap connection once
    the metadata names the brokers, and asks "a broker that is up" for the coordinator: with none up yet, it asks
    again on a 500 ms timer (bench/log_start_bench.py: a fresh producer's `init_transactions` took about 55 ms or
    about 507 ms, each about half of the time). The first metadata request learns the brokers from the bootstrap
    server; the second goes to a learned broker, which connects it."""
    for _ in range(2):
        producer.list_topics(topic, timeout=timeout_s)


class WriterState(enum.Enum):
    IDLE = "IDLE"
    OPEN = "OPEN"
    PREPARED = "PREPARED"
    CLOSED = "CLOSED"


class LogWriter:
    def __init__(
        self,
        options: LogStoreOptions,
        value_format: FormatBase,
        key_format: KeyFormat | None,
        transactional_id: str | None,
    ) -> None:
        self.options = options
        self.value_format = value_format
        self.key_format = key_format
        self.transactional = options.consistency == "transactional"
        self._transactional_id = transactional_id if self.transactional else None
        self._producer: Producer | None = None
        self._state = WriterState.IDLE
        self._offsets: dict[int, int] = {}
        self._errors: list[str] = []
        self._failed = False  # a flush failed: close() drops what is queued instead of waiting for it again

    @property
    def state(self) -> WriterState:
        return self._state

    def _client(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(producer_config(self.options.properties, self._transactional_id))
            if self.transactional:
                try:
                    _connect(self._producer, self.options.topic, self.options.request_timeout_s)
                    self._producer.init_transactions(self.options.request_timeout_s)
                except KafkaException as e:
                    raise LogStoreUnavailableError(
                        f"topic {self.options.topic!r}: could not start a Kafka transaction on "
                        f"{self.options.bootstrap_servers}: {e}"
                    ) from None
        return self._producer

    def start(self) -> None:
        """Start the producer now (a transactional one registers its transactional id: a zombie producer with the
        same id is fenced, and its open transaction is aborted)."""
        self._client()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._errors.append(f"partition {msg.partition()}: {err}")
        else:
            p, o = msg.partition(), msg.offset()
            if o + 1 > self._offsets.get(p, -1):
                self._offsets[p] = o + 1

    def write(self, batch: pa.RecordBatch | pa.Table, buckets: np.ndarray) -> int:
        """Produce the changes of `batch` (table columns + `_row_kind`) to partitions `buckets`; the records sent."""
        if self._state is WriterState.CLOSED:
            raise LogStoreError(f"topic {self.options.topic!r}: the log writer is closed")
        if self._state is WriterState.PREPARED:
            raise LogStoreError(f"topic {self.options.topic!r}: commit or abort the prepared transaction first")
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        buckets = np.asarray(buckets)
        if self.options.changelog_mode == "upsert" and ROW_KIND_COLUMN in table.schema.names:
            keep = pc.not_equal(table.column(ROW_KIND_COLUMN), RowKind.UPDATE_BEFORE.value)
            buckets = buckets[keep.to_numpy(zero_copy_only=False)]
            table = table.filter(keep)
        if table.num_rows == 0:
            return 0
        record_batch = table.combine_chunks().to_batches()[0]
        encoded = self.value_format.encode_batch(record_batch)
        keys: Sequence[bytes | None]
        if self.key_format is not None:
            keys = self.key_format.encode_batch(record_batch.take(pa.array(encoded.rows)))
        else:
            keys = [None] * len(encoded.values)
        producer = self._client()
        if self.transactional and self._state is WriterState.IDLE:
            producer.begin_transaction()
        self._state = WriterState.OPEN
        topic = self.options.topic
        targets = buckets[encoded.rows]
        for value, key, partition, on_delivery in zip(encoded.values, keys, targets.tolist(), self._reports(targets)):
            while True:
                try:   # positional: passing on_delivery by keyword doubles the call's cost (1 us more a record)
                    producer.produce(topic, value, key, partition, on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
        producer.poll(0)
        return len(encoded.values)

    def _reports(self, partitions: np.ndarray) -> list[Any]:
        """The delivery callback of each record. In a transaction only each partition's last record reports (its
        offset is what `prepare` returns; records of one partition are delivered in order): a record that fails
        makes the transaction fail to commit, so the others need no report (a callback costs librdkafka and the
        delivery poll about a microsecond a record). Without a transaction every record reports, so that a failure
        is seen."""
        if not self.transactional:
            return [self._on_delivery] * len(partitions)
        last = np.zeros(len(partitions), dtype=bool)
        if len(partitions):
            _, from_end = np.unique(partitions[::-1], return_index=True)
            last[len(partitions) - 1 - from_end] = True
        return [self._on_delivery if is_last else None for is_last in last.tolist()]

    def flush(self) -> None:
        if self._producer is None:
            return
        left = self._producer.flush(self.options.request_timeout_s)
        if left:
            self._failed = True
            raise LogStoreUnavailableError(
                f"topic {self.options.topic!r}: {left} records not delivered to {self.options.bootstrap_servers} "
                f"within {self.options.request_timeout_s:.0f} s"
            )
        if self._errors:
            errors, self._errors = self._errors, []
            self._failed = True
            raise LogStoreError(f"topic {self.options.topic!r}: delivery failed: {'; '.join(errors[:3])}")

    def prepare(self) -> dict[int, int]:
        """Flush; per partition, the offset after the last record written since the last commit."""
        if self._state is WriterState.OPEN:
            self.flush()
            self._state = WriterState.PREPARED
        offsets, self._offsets = dict(self._offsets), {}
        return offsets

    def mark(self, group: str, partition: int, offset: int, metadata: str) -> None:
        """Put `(offset, metadata)` as consumer group `group`'s committed offset of `partition` into the open
        transaction (Kafka's transactional offset commit): it becomes visible exactly when the records do, and
        `LogStore.marker` reads it back, so a retry can tell whether this transaction committed."""
        if not self.transactional or self._state not in (WriterState.OPEN, WriterState.PREPARED):
            raise LogStoreError(f"topic {self.options.topic!r}: a marker needs an open transaction")
        consumer = group_consumer(self.options.properties, group)
        try:
            self._client().send_offsets_to_transaction(
                [TopicPartition(self.options.topic, partition, offset, metadata=metadata)],
                consumer.consumer_group_metadata(), self.options.request_timeout_s)
        except KafkaException as e:
            raise LogStoreError(f"topic {self.options.topic!r}: recording the transaction's marker in group "
                                f"{group!r} failed: {e}") from None

    def commit(self) -> None:
        if self._state is WriterState.OPEN:
            self.prepare()
        if self._state is WriterState.PREPARED and self.transactional and self._producer is not None:
            try:
                self._producer.commit_transaction(self.options.request_timeout_s)
            except KafkaException as e:
                raise LogStoreError(
                    f"topic {self.options.topic!r}: committing the Kafka transaction failed: {e}"
                ) from None
        self._state = WriterState.IDLE

    def abort(self) -> None:
        if self._state in (WriterState.OPEN, WriterState.PREPARED) and self.transactional and self._producer:
            try:
                self._producer.abort_transaction(self.options.request_timeout_s)
            except KafkaException as e:
                log.warning("topic %s: aborting the Kafka transaction failed: %s", self.options.topic, e)
        self._offsets, self._errors = {}, []
        self._state = WriterState.IDLE

    def close(self) -> None:
        if self._state in (WriterState.OPEN, WriterState.PREPARED):
            self.abort()
        if self._producer is not None and not self.transactional:
            if self._failed:
                self._producer.purge()
                self._producer.flush(0)
            else:
                self._producer.flush(self.options.request_timeout_s)
        self._producer = None
        self._state = WriterState.CLOSED
