"""A table's topic and where its readers start: topic created and deleted with the table, the default log system,
DESCRIBE, a broker that is not there, and the `latest` and `from-timestamp` scans."""
from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

import tablestore
from log_helpers import SCHEMA, changes, drop_created_tables, kafka_catalog, row, rows
from logstore.errors import LogStoreError
from logstore.kafka import KafkaAdmin, producer_config
from logstore.store import LogStore

CLOSED_PORT = "127.0.0.1:1"


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def topics(bootstrap: str) -> set[str]:
    return set(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics)


def topic_exists(bootstrap: str, topic: str, *, wait_for: bool = True, within_s: float = 15) -> bool:
    """Whether `topic` is in the cluster's metadata, waiting (bounded) for it to become `wait_for`: a new or
    deleted topic reaches a fresh client's metadata only after a moment."""
    deadline = time.monotonic() + within_s
    while (topic in topics(bootstrap)) != wait_for and time.monotonic() < deadline:
        time.sleep(0.1)
    return topic in topics(bootstrap)


@pytest.mark.kafka
def test_topic_is_created_and_deleted_with_the_table(tmp_path: Path, kafka_bootstrap: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.orders", SCHEMA, primary_key=["id"], options={"bucket": "3", "log.retention": "2 h"})
    topic = t.describe()["options"]["log.topic"]  # type: ignore[index]
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})

    assert topic_exists(kafka_bootstrap, topic)
    meta = admin.list_topics(topic=topic, timeout=10).topics[topic]
    assert meta.error is None and len(meta.partitions) == 3
    resource = ConfigResource(ResourceType.TOPIC, topic)
    config = admin.describe_configs([resource])[resource].result(timeout=10)
    assert config["retention.ms"].value == str(2 * 3600 * 1000)

    cat.drop_table("db.orders")
    assert not topic_exists(kafka_bootstrap, topic, wait_for=False)
    assert not cat.table_exists("db.orders")


@pytest.mark.kafka
def test_a_dropped_tables_topic_stays_dropped_on_a_broker_that_auto_creates(tmp_path: Path, kafka_bootstrap: str) -> None:
    """The development broker auto-creates topics; a table's producer never asks it to, so a writer still holding
    the dropped table's topic fails instead of bringing the topic back."""
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    topic = cat.create_table("db.gone", SCHEMA, options={"bucket": "1"}).describe()["log"]["topic"]  # type: ignore[index]
    cat.drop_table("db.gone")
    assert not topic_exists(kafka_bootstrap, topic, wait_for=False)
    producer = Producer(producer_config({"bootstrap.servers": kafka_bootstrap, "message.timeout.ms": "3000"}, None))
    errors: list[object] = []
    producer.produce(topic, b"late", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(15)
    assert len(errors) == 1 and errors[0] is not None
    time.sleep(1)
    assert not topic_exists(kafka_bootstrap, topic, wait_for=False, within_s=1)


@pytest.mark.kafka
def test_topic_without_retention_keeps_the_broker_default(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = kafka_catalog(tmp_path, kafka_bootstrap).create_table("db.t", SCHEMA, options={"bucket": "2"})
    topic = t.describe()["log"]["topic"]  # type: ignore[index]
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    entry = admin.describe_configs([resource])[resource].result(timeout=10)["retention.ms"]
    assert entry.source != 1  # 1 = DYNAMIC_TOPIC_CONFIG: nothing was set on the topic


@pytest.mark.kafka
def test_each_table_gets_its_own_topic_named_after_it(tmp_path: Path, kafka_bootstrap: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    a = cat.create_table("db.a", SCHEMA)
    cat.drop_table("db.a")
    b = cat.create_table("db.a", SCHEMA)  # same name again: a new topic, nothing of the dropped table's log
    ta, tb = a.describe()["log"]["topic"], b.describe()["log"]["topic"]  # type: ignore[index]
    assert ta != tb and ta.startswith("db.a.") and tb.startswith("db.a.")
    assert topic_exists(kafka_bootstrap, tb)


@pytest.mark.kafka
def test_log_system_none_has_no_topic(tmp_path: Path, kafka_bootstrap: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    before = topics(kafka_bootstrap)
    t = cat.create_table("db.files_only", SCHEMA, primary_key=["id"], options={"log.system": "none"})
    t.write(rows(row(1, "a")))

    assert t.describe()["log"] == {"system": "none"}
    assert "log.topic" not in t.describe()["options"]  # type: ignore[operator]
    assert not any(name.startswith("db.files_only") for name in topics(kafka_bootstrap) - before)
    with pytest.raises(tablestore.TableStoreError, match="no log store"):
        t.read_changes()
    cat.drop_table("db.files_only")  # no broker call needed


def test_default_log_system_follows_the_session_bootstrap_servers(tmp_path: Path) -> None:
    plain = tablestore.Catalog(str(tmp_path / "plain"))
    plain.create_database("db")
    t = plain.create_table("db.t", SCHEMA, primary_key=["id"])
    assert t.describe()["options"]["log.system"] == "none"  # type: ignore[index]
    assert t.describe()["log"] == {"system": "none"}
    t.write(rows(row(1, "a")))  # the embedded default works without any broker
    assert t.read().num_rows == 1


@pytest.mark.kafka
def test_describe_names_the_log_system_and_topic(tmp_path: Path, kafka_bootstrap: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"log.format": "debezium-avro"})
    d = t.describe()
    options, log = d["options"], d["log"]
    assert options["log.system"] == "kafka"  # type: ignore[index]
    assert options["log.topic"].startswith("db.t.")  # type: ignore[index]
    assert log == {  # type: ignore[comparison-overlap]
        "system": "kafka", "topic": options["log.topic"], "bootstrap": kafka_bootstrap,  # type: ignore[index]
        "format": "debezium-avro", "key-format": "json", "changelog-mode": "upsert",
        "consistency": "transactional", "scan": "full", "retention": "cluster default",
    }
    # a fresh catalog reading the stored table sees the same log
    again = tablestore.Catalog(str(tmp_path / "wh")).get_table("db.t")
    assert again.describe()["log"] == log

    # `tablestore describe`'s text: a label, then at least one space, then its value (issue 52: "log bootstrap127...")
    from tablestore.cli import main

    with contextlib.redirect_stdout(io.StringIO()) as out:
        assert main(["describe", "db.t", "--warehouse", str(tmp_path / "wh")]) == 0
    lines = out.getvalue().splitlines()
    assert f"log bootstrap {kafka_bootstrap}" in [" ".join(line.split()) for line in lines]
    assert all(re.match(r"^\S+( \S+)? +\S", line) for line in lines if line.startswith("log ")), lines


# -- a broker that is not there -------------------------------------------------------------------

def test_create_table_against_a_closed_port_fails_fast_and_creates_nothing(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path / "wh"), options={
        "table-storage.log.properties.bootstrap.servers": CLOSED_PORT})
    cat.create_database("db")
    started = time.monotonic()
    with pytest.raises(LogStoreError, match=CLOSED_PORT):
        cat.create_table("db.t", SCHEMA, primary_key=["id"])
    assert time.monotonic() - started < 30  # an error, not a hang (request timeout 10 s, loaded CI)
    assert not cat.table_exists("db.t")


@pytest.mark.kafka
@pytest.mark.parametrize("consistency", ["transactional", "eventual"])
def test_write_and_read_against_a_lost_broker_fail_fast(
    tmp_path: Path, kafka_bootstrap: str, consistency: str
) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"log.consistency": consistency})
    t.write(rows(row(1, "a")))
    # the broker goes away after CREATE TABLE: point the table's log store at a closed port
    log_store = t._handle.log
    assert log_store is not None
    lost = dataclasses.replace(log_store.options, properties={"bootstrap.servers": CLOSED_PORT},
                               request_timeout_s=3.0)
    t._handle = dataclasses.replace(t._handle, log=LogStore(lost, log_store.schema, log_store.primary_key))

    started = time.monotonic()
    with pytest.raises(LogStoreError, match=CLOSED_PORT):
        t.write(rows(row(2, "b")))
    assert time.monotonic() - started < 15  # an error, not a hang (request timeout 3 s, loaded CI)
    assert [r["id"] for r in t.read().to_pylist()] == [1]  # no snapshot without its log records

    started = time.monotonic()
    with pytest.raises(LogStoreError, match=CLOSED_PORT):
        list(t.read_changes(scan="latest"))
    assert time.monotonic() - started < 15  # an error, not a hang (request timeout 3 s, loaded CI)


def test_admin_ping_names_the_servers_and_times_out() -> None:
    started = time.monotonic()
    with pytest.raises(LogStoreError, match="did not answer within 2 s"):
        KafkaAdmin({"bootstrap.servers": CLOSED_PORT}, timeout_s=2.0).ping()
    assert time.monotonic() - started < 10


# -- where readers start --------------------------------------------------------------------------

@pytest.mark.kafka
def test_latest_scan_sees_only_changes_after_it_started(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = kafka_catalog(tmp_path, kafka_bootstrap).create_table("db.t", SCHEMA, primary_key=["id"],
                                                              options={"bucket": "2"})
    t.write(rows(row(1, "before"), row(2, "before")))

    changes_it = t.read_changes(scan="latest", timeout_s=1.5)  # started here
    t.write(rows(row(3, "after")))
    got = changes(changes_it)
    assert [(k, r["id"], r["name"]) for k, r in got] == [("+I", 3, "after")]

    # a reader running in another thread sees a write made while it waits
    seen: list[tuple[str, dict[str, object]]] = []
    waiting = t.read_changes(scan="latest", timeout_s=3)
    reader = threading.Thread(target=lambda: seen.extend(changes(waiting)))
    reader.start()
    time.sleep(0.3)  # the reader is polling
    t.write(rows(row(2, "updated"), row(4, "new")))
    reader.join(timeout=15)
    assert not reader.is_alive()
    # key 2 existed before the reader started: its update carries the row it replaces (the table's at the start)
    assert sorted((k, r["id"], r["name"]) for k, r in seen) == [("+I", 4, "new"), ("+U", 2, "updated"),
                                                                ("-U", 2, "before")]


@pytest.mark.kafka
def test_latest_scan_sees_a_transaction_that_commits_after_it_started(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = kafka_catalog(tmp_path, kafka_bootstrap).create_table("db.t", SCHEMA, primary_key=["id"])
    w = t.log_writer()
    w.write(rows(row(1, "in flight")))
    assert w._log_writer is not None
    w._log_writer.flush()  # on the broker, before the reader starts, in a transaction still open

    changes_it = t.read_changes(scan="latest", timeout_s=1.5)
    w.commit()
    w.close()

    assert [(k, r["id"]) for k, r in changes(changes_it)] == [("+I", 1)]


@pytest.mark.kafka
def test_from_timestamp_scan_by_argument_and_by_option(tmp_path: Path, kafka_bootstrap: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    boundary = int(time.time() * 1000) + 1500
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={
        "bucket": "2", "log.scan": "from-timestamp", "log.scan.timestamp-millis": str(boundary)})
    t.write(rows(row(1, "early"), row(2, "early")))
    time.sleep(max(0.0, boundary / 1000 - time.time()) + 0.05)
    t.write(rows(row(3, "late"), row(1, "late")))

    by_option = changes(t.read_changes(timeout_s=1))  # log.scan / log.scan.timestamp-millis of the table
    # key 1 existed before the start: its update carries the row it replaces
    assert sorted((k, r["id"], r["name"]) for k, r in by_option) == [
        ("+I", 3, "late"), ("+U", 1, "late"), ("-U", 1, "early")]
    stored = changes(t.read_changes(timeout_s=1, normalize=False))  # the records as the log stores them
    assert sorted((k, r["id"], r["name"]) for k, r in stored) == [("+I", 1, "late"), ("+I", 3, "late")]

    by_argument = changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1))
    assert sorted((k, r["id"], r["name"]) for k, r in by_argument) == [
        ("+I", 1, "early"), ("+I", 2, "early"), ("+I", 3, "late"), ("+U", 1, "late"), ("-U", 1, "early")]

    future = changes(t.read_changes(scan="from-timestamp", timestamp_ms=boundary + 3_600_000, timeout_s=0.5))
    assert future == []


@pytest.mark.kafka
def test_scan_arguments_are_checked_before_reading(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = kafka_catalog(tmp_path, kafka_bootstrap).create_table("db.t", SCHEMA, primary_key=["id"])
    with pytest.raises(tablestore.TableStoreError, match="needs timestamp_ms"):
        t.read_changes(scan="from-timestamp")
    with pytest.raises(tablestore.TableStoreError, match="scan must be one of"):
        t.read_changes(scan="earliest")  # type: ignore[arg-type]
