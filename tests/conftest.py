"""Session fixtures shared by every test directory: the real Kafka broker the project runs (see logstore/broker.py)
and a real S3 server (SeaweedFS, tests/s3_server.py).

Tests that use `kafka_bootstrap` are marked `@pytest.mark.kafka`."""
from __future__ import annotations

import os
import socket
import sys
import uuid
from collections.abc import Iterator

import free_ports
import hang_watchdog
import pytest
import s3_server as s3_server_module
import tablestore
import spark_cluster as spark_cluster_module

from logstore import broker
from logstore.errors import BrokerToolMissingError


def _bindable(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _own_broker_per_worker() -> None:
    """Under pytest-xdist (`-n N`, as scripts/dev.py runs the suite) each worker process has its own session and so
    its own broker: worker `gwK` moves the port by 20*K and keeps its state in a folder of its own, so one worker's
    broker stopping at its end never pulls the broker from under another. A port some other process holds (the
    developer's own `tablestore kafka start` on 19092, as the README tells them to run) is left alone: the worker
    takes a free pair instead."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw"):
        return
    index = int(worker[2:])
    port = broker.default_port() + 20 * index
    os.environ["TABLESTORE_KAFKA_DIR"] = f"{broker.run_dir()}-{worker}"
    os.environ.pop("TABLESTORE_KAFKA_CONTROLLER_PORT", None)
    running = broker.status()   # this worker's broker left running by an interrupted run is reused where it is
    if running is not None:
        port = int(running.rsplit(":", 1)[1])
    elif not (_bindable(port) and _bindable(port + 1)):
        port = free_ports.free_port_pair()
    os.environ["TABLESTORE_KAFKA_PORT"] = str(port)


_own_broker_per_worker()

# every JSON document the Spark jar and Python hand each other in a test is checked against its one schema
# (tablestore/spark/handover.py); the JVMs, Python workers and catalog services the tests start inherit it
os.environ.setdefault("TABLESTORE_CHECK_HANDOVER", "1")


@pytest.fixture(autouse=True)
def _hang_watchdog(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test still running after `hang_watchdog.watchdog_seconds()` prints every stack it hangs on."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")

    def report(text: str) -> None:   # to the real stderr: a run ended by pytest-timeout shows no captured output
        with capture.global_and_fixture_disabled():
            sys.stderr.write(text)
            sys.stderr.flush()

    disarm = hang_watchdog.start(request.node.nodeid, report)
    yield
    disarm()


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """Bootstrap address of the project's broker: reuses a running one, else starts it and stops it at the end."""
    running = broker.status()
    if running is not None:
        yield running
        return
    try:
        address = broker.start()
    except BrokerToolMissingError as exc:
        if os.environ.get("CI"):
            raise  # CI must run the Kafka tests: a machine without java/mvn is a broken CI machine
        pytest.skip(f"cannot run the Kafka broker here: {exc}")
    try:
        yield address
    finally:
        broker.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The object-store and cluster tests run last: on a machine without the cached SeaweedFS binary,
    scripts/dev.py builds it in the background while the others run (the fixture waits for that build)."""
    items.sort(key=lambda item: item.get_closest_marker("s3") is not None or item.get_closest_marker("cluster") is not None)


@pytest.fixture
def cat(tmp_path: "os.PathLike[str]") -> tablestore.Catalog:
    """A catalog in the test's temporary directory, with the database `db` (a module may define its own `cat`)."""
    c = tablestore.Catalog(str(tmp_path))
    c.create_database("db")
    return c


@pytest.fixture(scope="session")
def s3_server() -> Iterator["s3_server_module.S3Server"]:
    """A real S3 server (SeaweedFS, tests/s3_server.py) for the session; tests that use it are marked `s3`."""
    try:
        with s3_server_module.running() as server:
            yield server
    except s3_server_module.S3ServerUnavailable as exc:
        if os.environ.get("CI"):
            raise  # CI must run the object-store tests
        pytest.skip(f"no S3 server here: {exc}")


@pytest.fixture
def s3_warehouse(s3_server: "s3_server_module.S3Server") -> str:
    """A fresh warehouse URL on the S3 server (its own prefix in the test bucket)."""
    return f"s3://{s3_server.bucket}/wh-{uuid.uuid4().hex[:12]}"


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator["spark_cluster_module.SparkCluster"]:
    """A Spark standalone cluster (a master and two one-core workers, tests/spark_cluster.py) for the session;
    tests that use it are marked `cluster`."""
    with spark_cluster_module.running() as cluster:
        yield cluster
