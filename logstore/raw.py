"""Records of any topic as they are on the wire (bytes), not a table's log: what a CDC source's first record or a
failing record says (its schema, its key), for the driver's decisions (create a table from the first record; evolve
it at the record a decoder stopped at); and `produce_raw`, how the demo, tests and benchmarks play a source
database's change stream into a topic. Uses the client configurations `logstore.kafka` owns."""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from collections.abc import Iterable

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaException, Producer, TopicPartition

from logstore.errors import LogStoreError
from logstore.kafka import KafkaAdmin, LogStoreUnavailableError, TopicError, consumer_config, producer_config


@dataclass(frozen=True)
class KafkaRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


def topic_partitions(properties: Mapping[str, str], topic: str) -> int | None:
    """How many partitions `topic` has; None when it does not exist (LogStoreUnavailableError: no broker)."""
    return KafkaAdmin(properties).partitions(topic)


def recreate_topic(properties: Mapping[str, str], topic: str, partitions: int) -> None:
    """`topic`, empty, with `partitions` partitions (deleted first if it exists: the demo's and tests' sources)."""
    admin = KafkaAdmin(properties)
    deadline = time.monotonic() + 30
    if admin.partitions(topic) is not None:
        admin.delete_topic(topic)
        while admin.partitions(topic) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
    while True:
        try:
            admin.create_topic(topic, partitions, None)
            return
        except TopicError:   # its deletion is not finished on the broker yet
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def record_at(properties: Mapping[str, str], topic: str, partition: int, offset: int,
              timeout_s: float = 30.0) -> KafkaRecord:
    """The record at `offset` of `topic`'s `partition` (read uncommitted: a CDC topic is not ours)."""
    found = _read(properties, topic, {partition: offset}, lambda r: r.offset == offset and r.partition == partition,
                  timeout_s)
    if found is None:
        raise LogStoreError(f"topic {topic!r} partition {partition}: no record at offset {offset} within "
                            f"{timeout_s:.0f} s")
    return found


def first_record(properties: Mapping[str, str], topic: str, *, latest: bool = False,
                 timeout_s: float = 30.0) -> KafkaRecord | None:
    """The first record of `topic` with a value (tombstones skipped), from its beginning, or (`latest`) the first
    one produced after now; None when none arrives within `timeout_s`."""
    partitions = KafkaAdmin(properties).partitions(topic)
    if partitions is None:
        raise TopicError(f"topic {topic!r} does not exist on {properties.get('bootstrap.servers')}")
    start = {p: OFFSET_END if latest else OFFSET_BEGINNING for p in range(partitions)}
    return _read(properties, topic, start, lambda r: r.value is not None, timeout_s)


def _read(properties: Mapping[str, str], topic: str, start: Mapping[int, int], wanted: Callable[[KafkaRecord], bool],
          timeout_s: float) -> KafkaRecord | None:
    consumer = Consumer(consumer_config(properties, read_committed=False))
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in start.items()])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in consumer.consume(num_messages=500, timeout=0.2):
                if m.error() is not None:
                    raise LogStoreError(f"topic {topic!r} partition {m.partition()}: {m.error()}")
                record = KafkaRecord(topic, int(m.partition() or 0), int(m.offset() or 0), m.key(), m.value())
                if wanted(record):
                    return record
        return None
    finally:
        consumer.close()


class RawProducer:
    """Produces (key, value) records to `topic` (partition by key, Kafka's default), idempotently; keeps where
    each one landed (`delivered`: partition, offset, and the `tag` given with it) when asked to."""

    def __init__(self, properties: Mapping[str, str], topic: str, *, track: bool = False) -> None:
        self.topic = topic
        self._bootstrap = properties.get("bootstrap.servers")
        self._producer = Producer(producer_config(properties, transactional_id=None))
        self._track = track
        self.delivered: list[tuple[int, int, Any]] = []
        self._failed: list[object] = []
        self.count = 0

    def produce(self, key: bytes | None, value: bytes | None, tag: object = None) -> None:
        def delivered(error: object, message: object) -> None:
            if error is not None:
                if not self._failed:
                    self._failed.append(error)
            elif self._track:
                self.delivered.append((message.partition(), message.offset(), tag))  # type: ignore[attr-defined]

        while True:
            try:
                self._producer.produce(self.topic, value=value, key=key, on_delivery=delivered)
                break
            except BufferError:
                self._producer.poll(0.05)
            except KafkaException as e:
                raise LogStoreError(f"topic {self.topic!r} on {self._bootstrap}: {e}") from None
        self.count += 1
        if self.count % 10000 == 0:
            self._producer.poll(0)

    def flush(self, timeout_s: float = 60.0) -> None:
        """Wait until every record is acknowledged (LogStoreError for the first that failed)."""
        left = self._producer.flush(timeout_s)
        if self._failed:
            raise LogStoreError(f"topic {self.topic!r} on {self._bootstrap}: {self._failed[0]}")
        if left:
            raise LogStoreUnavailableError(f"topic {self.topic!r}: {left} records not acknowledged within "
                                           f"{timeout_s:.0f} s")


def produce_raw(properties: Mapping[str, str], topic: str, records: Iterable[tuple[bytes | None, bytes | None]],
                *, timeout_s: float = 60.0) -> int:
    """Produce (key, value) records to `topic` and wait until every one is acknowledged; returns how many. A value
    of None is a tombstone."""
    producer = RawProducer(properties, topic)
    for key, value in records:
        producer.produce(key, value)
    producer.flush(timeout_s)
    return producer.count


def edge_records(properties: Mapping[str, str], topic: str, *, per_end: int = 3,
                 timeout_s: float = 10.0) -> list[KafkaRecord]:
    """A sample of `topic` for the schemas it carries: up to `per_end` records with a value at the start and at the
    end of each partition (the oldest and the newest schema a reader will meet, usually)."""
    partitions = KafkaAdmin(properties).partitions(topic)
    if partitions is None:
        raise TopicError(f"topic {topic!r} does not exist on {properties.get('bootstrap.servers')}")
    consumer = Consumer(consumer_config(properties, read_committed=False))
    try:
        starts = {}
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)
            if high <= low:
                continue
            starts[p] = {low: min(high, low + per_end), max(low, high - 4 * per_end): high}
    finally:
        consumer.close()
    out: list[KafkaRecord] = []
    for p, ranges in starts.items():
        for start, end in ranges.items():
            out += _range(properties, topic, p, start, end, timeout_s)
    return [r for r in out if r.value is not None]


def _range(properties: Mapping[str, str], topic: str, partition: int, start: int, end: int,
           timeout_s: float) -> list[KafkaRecord]:
    """The records of offsets [start, end) of one partition. Done when the consumer's position reaches `end`, so a
    range that ends in a transaction marker (a control record, never returned) ends there too; `consume` is asked
    for as many records as the range holds, so it returns as soon as they are there (asked for more, it waited
    its whole timeout each time: 0.2 s per range, 0.8 s of every ingest's start on a two-partition topic)."""
    consumer = Consumer(consumer_config(properties, read_committed=False))
    out: list[KafkaRecord] = []
    try:
        assigned = TopicPartition(topic, partition, start)
        consumer.assign([assigned])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for m in consumer.consume(num_messages=max(1, end - start - len(out)), timeout=0.05):
                if m.error() is not None:
                    raise LogStoreError(f"topic {topic!r} partition {partition}: {m.error()}")
                offset = int(m.offset() or 0)
                if offset < end:
                    out.append(KafkaRecord(topic, partition, offset, m.key(), m.value()))
                if offset >= end - 1:
                    return out
            if consumer.position([assigned])[0].offset >= end:
                return out
        return out
    finally:
        consumer.close()
