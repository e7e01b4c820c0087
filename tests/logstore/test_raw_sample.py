"""The sample of a source topic that `tablestore ingest` and `read_cdc` take before they start (the schemas it
carries): the first and last records of each partition, whether the topic was written in transactions or not."""
from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer

from logstore.kafka import KafkaAdmin
from logstore.raw import edge_records

pytestmark = pytest.mark.kafka


def _topic(bootstrap: str, transactional: bool, records: int = 40) -> str:
    """A two-partition topic of `records` values v0, v1, ... (even ones in partition 0), written in one transaction
    (so each partition ends with a commit marker, a control record no consumer returns) or without."""
    name = f"test-sample-{uuid.uuid4().hex[:12]}"
    KafkaAdmin({"bootstrap.servers": bootstrap}).create_topic(name, 2, None)
    producer = Producer({"bootstrap.servers": bootstrap, **({"transactional.id": name} if transactional else {})})
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    for i in range(records):
        producer.produce(name, value=f"v{i}".encode(), partition=i % 2)
    if transactional:
        producer.commit_transaction(30)
    producer.flush(30)
    return name


@pytest.mark.parametrize("transactional", [False, True], ids=["plain", "transactional"])
def test_the_sample_holds_each_partitions_first_and_last_records(kafka_bootstrap: str, transactional: bool) -> None:
    topic = _topic(kafka_bootstrap, transactional)
    sample = edge_records({"bootstrap.servers": kafka_bootstrap}, topic, per_end=3)
    values = {p: [r.value.decode() for r in sample if r.partition == p and r.value is not None] for p in (0, 1)}
    # 20 records per partition: the first 3 and the last 12 (4 x per_end: offsets, a marker among them when written
    # in a transaction)
    assert values[0][:3] == ["v0", "v2", "v4"] and values[1][:3] == ["v1", "v3", "v5"]
    assert values[0][-1] == "v38" and values[1][-1] == "v39"
    assert len(values[0]) == len(values[1]) == (3 + 11 if transactional else 3 + 12)


def test_a_partition_that_ends_in_a_transaction_marker_is_not_waited_on(kafka_bootstrap: str) -> None:
    """The last offset of a partition written in a transaction is its commit marker, which no consumer returns:
    the sample ends at the consumer's position instead of waiting for that offset until its timeout (which it
    did, `timeout_s` per partition)."""
    topic = _topic(kafka_bootstrap, transactional=True)
    began = time.monotonic()
    sample = edge_records({"bootstrap.servers": kafka_bootstrap}, topic, timeout_s=30.0)
    assert sample
    assert time.monotonic() - began < 15.0   # two partitions: 60 s when each waited for its marker
