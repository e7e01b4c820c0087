"""The project's own Kafka broker: it answers, runs transactions on one node, and start/stop/status behave."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from free_ports import free_port_pair
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from logstore import broker
from logstore.errors import BrokerError, BrokerToolMissingError


def _new_topic(bootstrap: str, partitions: int = 1) -> str:
    name = f"test-broker-{uuid.uuid4().hex[:12]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])[name].result(timeout=30)
    return name


def _consume_until(bootstrap: str, topic: str, isolation: str, last: bytes, timeout_s: float = 30) -> list[bytes]:
    """Read the topic from the start until the message `last` arrives; return every value read."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex}", "auto.offset.reset": "earliest",
        "isolation.level": isolation, "enable.auto.commit": False,
    })
    consumer.subscribe([topic])
    seen: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() is not None:
                continue
            value = msg.value()
            assert value is not None
            seen.append(value)
            if value == last:
                return seen
    finally:
        consumer.close()
    raise AssertionError(f"{last!r} not read from {topic} within {timeout_s} s; read {seen!r}")


@pytest.mark.kafka
def test_broker_answers_and_creates_topics(kafka_bootstrap: str) -> None:
    assert kafka_bootstrap == f"127.0.0.1:{broker.default_port()}"
    topic = _new_topic(kafka_bootstrap, partitions=3)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    deadline = time.monotonic() + 15  # a new topic reaches a fresh client's metadata after a moment
    metadata = admin.list_topics(timeout=10)
    while topic not in metadata.topics and time.monotonic() < deadline:
        time.sleep(0.1)
        metadata = admin.list_topics(timeout=10)
    assert [b.id for b in metadata.brokers.values()] == [1]
    assert len(metadata.topics[topic].partitions) == 3


@pytest.mark.kafka
def test_committed_transaction_visible_aborted_one_not(kafka_bootstrap: str) -> None:
    topic = _new_topic(kafka_bootstrap)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex}"})
    producer.init_transactions(30)

    def transaction(values: list[bytes], commit: bool) -> None:
        producer.begin_transaction()
        for v in values:
            producer.produce(topic, value=v)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.flush(30)
            producer.abort_transaction(30)

    transaction([b"c1", b"c2"], commit=True)
    transaction([b"a1", b"a2"], commit=False)
    transaction([b"end"], commit=True)

    assert _consume_until(kafka_bootstrap, topic, "read_committed", b"end") == [b"c1", b"c2", b"end"]
    # the aborted records did reach the log: a read_uncommitted reader sees them
    assert _consume_until(kafka_bootstrap, topic, "read_uncommitted", b"end") == [b"c1", b"c2", b"a1", b"a2", b"end"]


@pytest.mark.kafka
def test_second_start_is_a_no_op(kafka_bootstrap: str) -> None:
    state_file = broker.run_dir() / "state.json"
    pid_before = json.loads(state_file.read_text())["pid"]
    began = time.monotonic()
    assert broker.start() == kafka_bootstrap
    assert time.monotonic() - began < 10
    assert json.loads(state_file.read_text())["pid"] == pid_before
    assert broker.status() == kafka_bootstrap
    assert broker.pid() == pid_before


def test_status_and_stop_of_a_directory_without_broker(tmp_path: Path) -> None:
    assert broker.status(tmp_path) is None
    assert broker.pid(tmp_path) is None
    assert broker.stop(tmp_path) is False


def _free_port() -> int:
    return free_port_pair()


def test_port_taken_by_another_process_is_a_clear_error(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        with pytest.raises(BrokerError, match=f"port 127.0.0.1:{port} is taken"):
            broker.start(tmp_path, port=port)
    assert not (tmp_path / "state.json").exists()


def test_missing_java_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    port = _free_port()
    monkeypatch.setenv("TABLESTORE_KAFKA_CONTROLLER_PORT", str(_free_port()))
    with pytest.raises(BrokerToolMissingError, match="'java' not found"):
        broker.start(tmp_path / "run", port=port)


@pytest.mark.kafka
def test_jvm_that_cannot_start_gives_the_log_tail(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TABLESTORE_KAFKA_HEAP", "not-a-size")
    monkeypatch.setenv("TABLESTORE_KAFKA_CONTROLLER_PORT", str(_free_port()))
    with pytest.raises(BrokerError, match="did not come up") as info:
        broker.start(tmp_path, port=_free_port(), timeout_s=30)
    assert "heap size" in str(info.value)
    assert broker.status(tmp_path) is None


def test_a_broker_killed_while_starting_says_how_it_ended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The start of a broker killed from outside names the signal (CI met a broker that ended before its first log
    line, with nothing else to go on)."""
    monkeypatch.setenv("TABLESTORE_KAFKA_CONTROLLER_PORT", str(_free_port()))

    def kill_once_launched() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError, ValueError):
                os.kill(json.loads((tmp_path / "state.json").read_text())["pid"], signal.SIGKILL)
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_once_launched)
    killer.start()
    try:
        with pytest.raises(BrokerError, match="was killed by SIGKILL"):
            broker.start(tmp_path, port=_free_port(), timeout_s=60)
    finally:
        killer.join()
    assert broker.status(tmp_path) is None


def test_cli_kafka_takes_its_port_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`tablestore kafka start --port P --dir D` runs a second broker there; status and stop find it by D."""
    from tablestore import cli

    run_dir, port = tmp_path / "kafka", _free_port()
    assert cli.main(["kafka", "status", "--dir", str(run_dir)]) == cli.EXIT_LOG
    assert capsys.readouterr().out.strip() == "down"
    try:
        assert cli.main(["kafka", "start", "--port", str(port), "--dir", str(run_dir)]) == cli.EXIT_OK
        assert capsys.readouterr().out.strip() == f"127.0.0.1:{port}"
        assert cli.main(["--output", "json", "kafka", "status", "--dir", str(run_dir)]) == cli.EXIT_OK
        assert json.loads(capsys.readouterr().out) == {"bootstrap": f"127.0.0.1:{port}"}
        assert (run_dir / "state.json").exists()
    finally:
        assert cli.main(["kafka", "stop", "--dir", str(run_dir)]) == cli.EXIT_OK
    assert capsys.readouterr().out.strip() == "stopped"
    assert broker.status(run_dir) is None


def test_cli_kafka_port_taken_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tablestore import cli

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        assert cli.main(["kafka", "start", "--port", str(port), "--dir", str(tmp_path)]) == cli.EXIT_LOG
    assert f"port 127.0.0.1:{port} is taken" in capsys.readouterr().err


def test_a_cluster_id_that_starts_with_a_dash_still_formats(tmp_path: Path) -> None:
    """One random KRaft cluster id in 64 starts with '-' (URL-safe base64): new ones never do, as Kafka's own, and one
    kept from an older run is handed to the storage tool as `--cluster-id=ID`, not read as an option."""
    assert not any(broker._cluster_id().startswith("-") for _ in range(2000))
    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "cluster.id").write_text("-8EOsqgSSxGMVMsBcuX0kA")
    try:
        assert broker.start(tmp_path, port=_free_port(), timeout_s=60).startswith("127.0.0.1:")
    finally:
        broker.stop(tmp_path)


@pytest.mark.kafka
def test_a_plain_producer_writes_to_a_topic_nobody_created(kafka_bootstrap: str) -> None:
    """The development broker creates a topic on first use (Kafka's default): a producer, or a Debezium connector
    without `topic.creation.*`, writes to a new topic at once (issue 52: it used to stall and send nothing)."""
    topic = f"test-auto-{uuid.uuid4().hex[:12]}"
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    failures: list[object] = []
    producer.produce(topic, b"first", on_delivery=lambda err, _msg: failures.append(err) if err else None)
    assert producer.flush(30) == 0 and failures == []
    assert _consume_until(kafka_bootstrap, topic, "read_committed", b"first") == [b"first"]
