"""Thin, typed, lazy wrappers over confluent-kafka: one owner each for the admin client, producer and consumer
configuration. Nothing connects in `__init__`. Kafka errors are translated here, once, into LogStoreErrors that
name the bootstrap servers and topic concerned."""
from __future__ import annotations

import logging
import time
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Mapping

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

from logstore.errors import LogStoreError

log = logging.getLogger(__name__)


class LogStoreUnavailableError(LogStoreError):
    """The Kafka cluster did not answer in time."""


class TopicError(LogStoreError):
    """A topic could not be created, deleted or found."""


def base_config(properties: Mapping[str, str]) -> dict[str, Any]:
    if not properties.get("bootstrap.servers"):
        raise LogStoreError("no Kafka bootstrap servers: set log.properties.bootstrap.servers")
    return {"log_level": 0, "socket.connection.setup.timeout.ms": 5000, **properties}


class KafkaAdmin:
    def __init__(self, properties: Mapping[str, str], timeout_s: float = 10.0) -> None:
        self._properties = dict(properties)
        self._timeout_s = timeout_s
        self._client: AdminClient | None = None

    @property
    def bootstrap(self) -> str:
        return self._properties.get("bootstrap.servers", "")

    def _admin(self) -> AdminClient:
        if self._client is None:
            self._client = AdminClient(base_config(self._properties))
        return self._client

    def ping(self) -> None:
        """Raise LogStoreUnavailableError unless the cluster answers within the timeout."""
        try:
            meta = self._admin().list_topics(timeout=self._timeout_s)
        except KafkaException as e:
            raise LogStoreUnavailableError(
                f"Kafka at {self.bootstrap} did not answer within {self._timeout_s:.0f} s: {e}"
            ) from None
        if not meta.brokers:
            raise LogStoreUnavailableError(f"Kafka at {self.bootstrap} has no live broker")

    def partitions(self, topic: str) -> int | None:
        """Number of partitions of `topic`, None when it does not exist. A topic created a moment ago whose
        partitions have no leader yet (LEADER_NOT_AVAILABLE) is asked again within the timeout."""
        self.ping()
        deadline = time.monotonic() + self._timeout_s
        while True:
            meta = self._admin().list_topics(topic=topic, timeout=self._timeout_s)
            t = meta.topics.get(topic)
            if t is None:
                return None
            if t.error is None:
                return len(t.partitions)
            if t.error.code() not in _NO_LEADER_YET or time.monotonic() >= deadline:
                return None
            time.sleep(0.1)

    def _await_leaders(self, topic: str) -> None:
        """Wait (within the timeout) until every partition of a topic just created has a leader, so that the
        table that owns it is usable when its CREATE returns; only logged when the time runs out."""
        deadline = time.monotonic() + self._timeout_s
        while time.monotonic() < deadline:
            t = self._admin().list_topics(topic=topic, timeout=self._timeout_s).topics.get(topic)
            if t is not None and t.error is None and t.partitions and all(
                    p.leader >= 0 for p in t.partitions.values()):
                return
            time.sleep(0.1)
        log.warning("topic %s: its partitions have no leader %.0f s after its creation", topic, self._timeout_s)

    def create_topic(self, topic: str, partitions: int, retention_ms: int | None) -> None:
        self.ping()
        config = {} if retention_ms is None else {"retention.ms": str(retention_ms)}
        futures = self._admin().create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1, config=config)],
            request_timeout=self._timeout_s,
        )
        try:
            futures[topic].result(timeout=self._timeout_s)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                raise TopicError(f"topic {topic!r} already exists on {self.bootstrap}") from None
            raise TopicError(f"could not create topic {topic!r} on {self.bootstrap}: {e}") from None
        self._await_leaders(topic)
        log.info("created topic %s with %s partitions", topic, partitions)

    def delete_topic(self, topic: str, *, missing_ok: bool = True) -> None:
        self.ping()
        futures = self._admin().delete_topics([topic], request_timeout=self._timeout_s)
        try:
            futures[topic].result(timeout=self._timeout_s)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if missing_ok and isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                return
            raise TopicError(f"could not delete topic {topic!r} on {self.bootstrap}: {e}") from None
        log.info("deleted topic %s", topic)

    def list_offsets(
        self, topic: str, partitions: int, *, timestamp_ms: int | None, read_committed: bool
    ) -> dict[int, int]:
        """Per partition, the end offset (the last stable offset when `read_committed`), or with `timestamp_ms` the
        first offset whose timestamp is >= it (the end offset when no record is that recent). Resolved now, as
        concrete offsets: a reader starting there never skips a record produced after this call."""
        self.ping()
        level = IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED

        def query(spec: OffsetSpec) -> dict[int, int]:
            # a topic created a moment ago may have no partition leader yet (NOT_LEADER_FOR_PARTITION,
            # LEADER_NOT_AVAILABLE: retriable errors): ask again within the request timeout
            deadline = time.monotonic() + self._timeout_s
            while True:
                futures = self._admin().list_offsets(
                    {TopicPartition(topic, p): spec for p in range(partitions)},
                    isolation_level=level, request_timeout=self._timeout_s,
                )
                try:
                    return {tp.partition: f.result(timeout=self._timeout_s).offset for tp, f in futures.items()}
                except KafkaException as e:
                    err = e.args[0] if e.args else None
                    if isinstance(err, KafkaError) and (err.retriable() or err.code() in _NO_LEADER_YET) and (
                            time.monotonic() < deadline):
                        time.sleep(0.1)
                        continue
                    raise TopicError(
                        f"could not list the offsets of topic {topic!r} on {self.bootstrap}: {e}") from None
                except FutureTimeoutError as e:
                    raise TopicError(
                        f"could not list the offsets of topic {topic!r} on {self.bootstrap}: {e}") from None

        end = query(OffsetSpec.latest())  # before the timestamp lookup: a miss there starts no later than this
        if timestamp_ms is None:
            return end
        found = query(OffsetSpec.for_timestamp(timestamp_ms))
        return {p: o if o >= 0 else end[p] for p, o in found.items()}


_NO_LEADER_YET = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._NOENT)
"""_NOENT: "Failed to query partition leaders: No leaders found", what librdkafka says of a topic a broker that
just started has created but not yet given leaders."""


def producer_config(properties: Mapping[str, str], transactional_id: str | None) -> dict[str, Any]:
    """Our tuning defaults, then the table's `log.properties.*` (they win), then what correctness needs."""
    tuning = {"linger.ms": 5, "batch.num.messages": 10000, "queue.buffering.max.messages": 1_000_000,
              "compression.type": "lz4"}
    # no topic is created by writing to it (a dropped table's topic stays dropped, whatever the broker's
    # auto.create.topics.enable): topics are the catalog's to create
    config = {**tuning, **base_config(properties), "enable.idempotence": True, "allow.auto.create.topics": False}
    if transactional_id is not None:
        config["transactional.id"] = transactional_id
        config.setdefault("transaction.timeout.ms", 60000)
    return config


def consumer_config(properties: Mapping[str, str], read_committed: bool) -> dict[str, Any]:
    """Our tuning defaults, then the table's `log.properties.*` (they win), then what correctness needs: no
    consumer-group offsets (positions live in snapshots and readers) and the isolation level of the table's
    consistency."""
    tuning = {"fetch.wait.max.ms": 10, "enable.partition.eof": False, "auto.offset.reset": "earliest"}
    return {
        **tuning,
        **base_config(properties),
        "group.id": "tablestore-reader",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
    }


_GROUP_CONSUMERS: dict[tuple[tuple[tuple[str, str], ...], str], Any] = {}
"""Consumers that only name a consumer group (markers of log transactions: tablestore.log_publish), kept per process:
creating one and finding its group coordinator costs tens of milliseconds per call otherwise."""


def group_consumer(properties: Mapping[str, str], group: str) -> Any:
    """A consumer of group `group` that never subscribes (committed offsets, group metadata), kept open."""
    from confluent_kafka import Consumer

    key = (tuple(sorted((str(k), str(v)) for k, v in properties.items())), group)
    consumer = _GROUP_CONSUMERS.get(key)
    if consumer is None:
        if len(_GROUP_CONSUMERS) >= 16:
            _GROUP_CONSUMERS.pop(next(iter(_GROUP_CONSUMERS))).close()
        consumer = _GROUP_CONSUMERS[key] = Consumer({**consumer_config(properties, True), "group.id": group})
    return consumer
