"""The development PostgreSQL server and Kafka Connect worker with Debezium (tablestore/cdc/postgres.py, connect.py,
connect_rest.py and their CLI, tablestore/cli_devtools.py): real processes, no mocks.

Ports are fixed per pytest-xdist worker (`gwK` moves them by 20*K, as tests/conftest.py does for the broker) and
10 above the defaults, so a developer's own server on 15432 or worker on 18083 is left alone. Run directories are
made under /tmp, not under pytest's tmp_path: as root, postgres runs as an unprivileged user, which must be able to
enter every parent of its directory (pytest's are private to root).
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import signal
import socket
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from tablestore import cli
from tablestore.cdc import connect, postgres
from tablestore.cdc.dev_process import DevServiceError, PortTakenError, ServiceStartError, ServiceToolMissingError

psycopg = pytest.importorskip("psycopg")

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
_SHIFT = 20 * int(_WORKER[2:]) if _WORKER.startswith("gw") else 0
PG_PORT = postgres.DEFAULT_PORT + 10 + _SHIFT          # the module's server
PG_LIFECYCLE_PORT = PG_PORT + 1
PG_CLI_PORT = PG_PORT + 2
CONNECT_PORT = connect.DEFAULT_PORT + 10 + _SHIFT


def _skip_unless_ci(exc: Exception) -> None:
    if os.environ.get("CI"):
        raise exc  # CI installs the cdc extra, java and mvn: a missing tool there is a broken machine
    pytest.skip(f"cannot run it here: {exc}")


@pytest.fixture
def run_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="tablestore-devtools-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="module")
def pg_server() -> Iterator[postgres.PostgresServer]:
    rdir = Path(tempfile.mkdtemp(prefix="tablestore-pg-"))
    try:
        server = postgres.start(rdir, port=PG_PORT)
    except ServiceToolMissingError as exc:
        shutil.rmtree(rdir, ignore_errors=True)
        _skip_unless_ci(exc)
    try:
        yield server
    finally:
        postgres.stop(rdir)
        shutil.rmtree(rdir, ignore_errors=True)


@pytest.fixture(scope="module")
def worker_dir() -> Iterator[Path]:
    rdir = Path(tempfile.mkdtemp(prefix="tablestore-connect-"))
    yield rdir
    shutil.rmtree(rdir, ignore_errors=True)


@pytest.fixture(scope="module")
def worker(kafka_bootstrap: str, worker_dir: Path) -> Iterator[connect.ConnectWorker]:
    """One worker for the module (a JVM start is the slow part); its Kafka topics are deleted at the end."""
    try:
        started = connect.start(worker_dir, port=CONNECT_PORT, bootstrap_servers=kafka_bootstrap)
    except ServiceToolMissingError as exc:
        _skip_unless_ci(exc)
    try:
        yield started
    finally:
        connect.stop(worker_dir)
        admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
        mine = [t for t in admin.list_topics(timeout=10).topics
                if t.startswith(started.group_id) or t.startswith("devtools")]
        if mine:
            for future in admin.delete_topics(mine, operation_timeout=30).values():
                future.result()


def _records(bootstrap: str, topic: str, *, until: Any, timeout_s: float = 60,
             linger_s: float = 0.0) -> list[dict[str, Any]]:
    """The topic's record values (JSON, tombstones left out) from the start, read until `until(values)` holds,
    then `linger_s` longer (to see a duplicate that would follow)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"devtools-{uuid.uuid4().hex}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False,
                         "topic.metadata.refresh.interval.ms": 500})
    values: list[dict[str, Any]] = []
    try:
        consumer.subscribe([topic])
        deadline, done_at = time.monotonic() + timeout_s, None
        while time.monotonic() < deadline and (done_at is None or time.monotonic() < done_at + linger_s):
            message = consumer.poll(0.5)
            value = None if message is None or message.error() is not None else message.value()
            if value is not None:
                values.append(json.loads(value))
            if done_at is None and until(values):
                done_at = time.monotonic()
        assert done_at is not None, f"{topic}: condition not met after {timeout_s} s; read {values}"
        return values
    finally:
        consumer.close()


def _ids(values: list[dict[str, Any]], op: str | None = None) -> list[int]:
    return [v["payload"]["after"]["id"] for v in values
            if v["payload"].get("after") and (op is None or v["payload"]["op"] == op)]


def _wait_slot_active(server: postgres.PostgresServer, dbname: str, slot: str, timeout_s: float = 60) -> None:
    """Debezium streams once its replication slot is active: a row inserted after that is a change event."""
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(server.dsn(dbname), autocommit=True) as conn:
        while True:
            row = conn.execute("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)).fetchone()
            if row is not None and row[0]:
                return
            assert time.monotonic() < deadline, f"slot {slot} not active after {timeout_s} s"
            time.sleep(0.2)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out.strip(), err.strip()


# -- postgres ----------------------------------------------------------------------------------------------------


def test_postgres_starts_once_answers_and_stops(run_dir: Path, pg_server: postgres.PostgresServer) -> None:
    try:
        server = postgres.start(run_dir, port=PG_LIFECYCLE_PORT)
        assert (server.host, server.port, server.user) == ("127.0.0.1", PG_LIFECYCLE_PORT, "postgres")
        assert postgres.status(run_dir) == server
        assert postgres.start(run_dir) == server   # idempotent: the same process
        with psycopg.connect(server.dsn()) as conn:
            assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
            assert conn.execute("SHOW fsync").fetchone() == ("off",)
        with psycopg.connect(server.url()) as conn:
            assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
        postgres.create_database(server, "shop")
        postgres.create_database(server, "shop")   # exist_ok
        with pytest.raises(DevServiceError, match="'shop' already exists"):
            postgres.create_database(server, "shop", exist_ok=False)
        with pytest.raises(PortTakenError, match=f"port 127.0.0.1:{PG_PORT} is taken.*TABLESTORE_POSTGRES_PORT"):
            postgres.start(run_dir / "other", port=PG_PORT)   # the module's server holds it
    finally:
        assert postgres.stop(run_dir)
    assert postgres.status(run_dir) is None
    assert postgres.stop(run_dir) is False
    assert not (run_dir / "state.json").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root runs postgres as another user")
def test_postgres_as_root_names_a_run_directory_its_user_cannot_enter(tmp_path: Path) -> None:
    """pytest's tmp_path lies in a directory only root may enter."""
    with pytest.raises(DevServiceError, match="cannot enter .*choose a run directory it can reach"):
        postgres.start(tmp_path / "pg", port=PG_LIFECYCLE_PORT)


def test_cli_postgres_start_status_stop(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _run(capsys, "postgres", "status", "--dir", str(run_dir)) == (cli.EXIT_LOG, "down", "")
    try:
        code, out, _ = _run(capsys, "postgres", "start", "--port", str(PG_CLI_PORT), "--dir", str(run_dir))
        assert (code, out) == (cli.EXIT_OK, f"host=127.0.0.1 port={PG_CLI_PORT} user=postgres dbname=postgres")
        code, out, _ = _run(capsys, "--output", "json", "postgres", "status", "--dir", str(run_dir))
        assert code == cli.EXIT_OK
        assert json.loads(out)["url"] == f"postgresql://postgres@127.0.0.1:{PG_CLI_PORT}/postgres"
    finally:
        assert _run(capsys, "postgres", "stop", "--dir", str(run_dir))[:2] == (cli.EXIT_OK, "stopped")
    assert _run(capsys, "postgres", "stop", "--dir", str(run_dir))[:2] == (cli.EXIT_OK, "not running")


def test_cli_a_taken_port_is_one_line_naming_it(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        for command, env in (("postgres", "TABLESTORE_POSTGRES_PORT"), ("connect", "TABLESTORE_CONNECT_PORT")):
            code, out, err = _run(capsys, command, "start", "--port", str(port), "--dir", str(run_dir / command))
            assert (code, out) == (cli.EXIT_LOG, "") and err.count("\n") == 0
            assert f"port 127.0.0.1:{port} is taken" in err and env in err


def test_the_errors_are_one_line_and_survive_pickling() -> None:
    trace = ("io.debezium.DebeziumException: Creation of replication slot failed\n\tat x.y(Z.java:1)\n"
             "Caused by: org.postgresql.util.PSQLException: ERROR: no\n\tat a.b(C.java:2)\n")
    errors: list[DevServiceError] = [
        PortTakenError("postgres", 15432, "TABLESTORE_POSTGRES_PORT", "Address already in use"),
        ServiceStartError("kafka connect", "it exited", Path("/x/connect.log"), "line\n[t] ERROR boom (c)\nlast"),
        connect.ConnectorFailedError("shop", "task 0", trace),
    ]
    for error in errors:
        assert "\n" not in str(error)
        back = pickle.loads(pickle.dumps(error))
        assert type(back) is type(error) and str(back) == str(error) and back.__dict__ == error.__dict__
    assert str(errors[1]).endswith("(see /x/connect.log): [t] ERROR boom (c)")
    assert str(errors[2]) == ("connector 'shop': task 0 FAILED: io.debezium.DebeziumException: Creation of "
                              "replication slot failed (root cause: org.postgresql.util.PSQLException: ERROR: no)")


# -- kafka connect with debezium ----------------------------------------------------------------------------------


@pytest.mark.kafka
def test_connect_start_is_idempotent_and_status_finds_it(
    worker: connect.ConnectWorker, worker_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert worker.url == f"http://127.0.0.1:{CONNECT_PORT}"
    assert connect.status(worker_dir) == worker
    assert connect.start(worker_dir) == worker
    assert _run(capsys, "connect", "status", "--dir", str(worker_dir)) == (cli.EXIT_OK, worker.url, "")
    properties = (worker_dir / "worker.properties").read_text()
    assert "group.id=" + worker.group_id in properties and "schemas.enable=true" in properties
    assert (worker_dir / "connect.log").stat().st_size > 0


@pytest.mark.kafka
def test_cli_register_postgres_runs_a_connector_or_says_why_not(
    worker: connect.ConnectWorker, pg_server: postgres.PostgresServer, capsys: pytest.CaptureFixture[str]
) -> None:
    postgres.create_database(pg_server, "devtools_cli")
    with psycopg.connect(pg_server.dsn("devtools_cli"), autocommit=True) as conn:
        conn.execute("CREATE TABLE items (id int PRIMARY KEY, name text)")
    common = ("--port", str(pg_server.port), "--url", worker.url, "--topic-prefix", "devtools_cli")
    code, out, err = _run(capsys, "connect", "register-postgres", "devtools-cli", "--database", "devtools_cli",
                          "--table", "items", "--config", "snapshot.mode=no_data", *common)
    assert (code, err) == (cli.EXIT_OK, "") and out.startswith("devtools-cli RUNNING (task 0 RUNNING)"), out
    try:
        code, out, err = _run(capsys, "connect", "register-postgres", "devtools-nodb", "--database", "no_such_db",
                              *common)
        assert (code, out) == (cli.EXIT_LOG, "") and err.count("\n") == 0
        assert "'devtools-nodb': registering its config" in err, err
        assert 'database "no_such_db" does not exist' in err, err   # Debezium's own validation, not Connect's 500
    finally:
        assert connect.delete_connector(worker.url, "devtools-cli")
    assert connect.connector_status(worker.url, "devtools-cli") is None
    assert connect.delete_connector(worker.url, "devtools-cli") is False


@pytest.mark.kafka
def test_a_connector_whose_task_fails_is_an_error_with_its_root_cause(
    worker: connect.ConnectWorker, pg_server: postgres.PostgresServer
) -> None:
    """decoderbufs is a server extension the development server does not have: the task fails creating its slot."""
    postgres.create_database(pg_server, "devtools_failing")
    try:
        with pytest.raises(connect.ConnectorFailedError, match=r"'devtools-failing': task 0 FAILED: .*decoderbufs"):
            connect.register_postgres(worker.url, "devtools-failing", host=pg_server.host, port=pg_server.port,
                                      user=pg_server.user, password=None, dbname="devtools_failing",
                                      topic_prefix="devtools_failing", config={"plugin.name": "decoderbufs"})
    finally:
        assert connect.delete_connector(worker.url, "devtools-failing")


@pytest.mark.kafka
def test_debezium_streams_inserts_and_its_connector_survives_a_kill_9_of_the_worker(
    worker: connect.ConnectWorker, worker_dir: Path, pg_server: postgres.PostgresServer, kafka_bootstrap: str
) -> None:
    """Last in the module: the worker it leaves is a new process."""
    postgres.create_database(pg_server, "devtools_shop")
    with psycopg.connect(pg_server.dsn("devtools_shop"), autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text)")
        conn.execute("INSERT INTO orders VALUES (1, 'before the connector')")
    name, topic = "devtools-shop", "devtools_shop.public.orders"
    state = connect.register_postgres(worker.url, name, host=pg_server.host, port=pg_server.port,
                                      user=pg_server.user, password=None, dbname="devtools_shop",
                                      topic_prefix="devtools_shop", tables=["orders"])
    assert state["connector"]["state"] == "RUNNING" and [t["state"] for t in state["tasks"]] == ["RUNNING"]
    slot = connect.slot_name_for(name)
    assert slot == "devtools_shop"

    # the row already there comes as a snapshot read; one inserted once the slot streams, as a change event
    values = _records(kafka_bootstrap, topic, until=lambda vs: 1 in _ids(vs, "r"))
    assert set(values[0]) == {"schema", "payload"} and values[0]["payload"]["source"]["table"] == "orders"
    _wait_slot_active(pg_server, "devtools_shop", slot)
    with psycopg.connect(pg_server.dsn("devtools_shop"), autocommit=True) as conn:
        conn.execute("INSERT INTO orders VALUES (2, 'streamed')")
    values = _records(kafka_bootstrap, topic, until=lambda vs: 2 in _ids(vs, "c"))
    assert [v["payload"]["after"] for v in values if v["payload"]["op"] == "c"] == [{"id": 2, "note": "streamed"}]

    # kill -9: the connector lives in the worker's Kafka topics, so the next start runs it again
    os.kill(worker.pid, signal.SIGKILL)
    restarted = connect.start(worker_dir, port=CONNECT_PORT, bootstrap_servers=kafka_bootstrap)
    assert restarted.pid != worker.pid and restarted.group_id == worker.group_id
    assert connect.connector_status(restarted.url, name) is not None
    with urllib.request.urlopen(f"{restarted.url}/connectors", timeout=10) as response:
        assert name in json.loads(response.read())
    _wait_slot_active(pg_server, "devtools_shop", slot)
    with psycopg.connect(pg_server.dsn("devtools_shop"), autocommit=True) as conn:
        conn.execute("INSERT INTO orders VALUES (3, 'after the kill')")
    values = _records(kafka_bootstrap, topic, until=lambda vs: 3 in _ids(vs), linger_s=2.0)
    assert _ids(values).count(3) == 1, _ids(values)
    assert connect.delete_connector(restarted.url, name)

