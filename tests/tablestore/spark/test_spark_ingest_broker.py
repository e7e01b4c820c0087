"""`tablestore ingest` when the Kafka broker goes away under it (issue 20): the job waits and retries inside Spark's
Kafka source and the table's log producer, or fails with a message that says Kafka is unreachable; either way nothing
committed is lost, and the job (or its restart from the same checkpoint) ends with the table equal to the source's
state and the table's own log holding each change once. The broker here is one of the test's own (its own port and
folder), killed with SIGKILL and started again on the same data."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

import pytest
from free_ports import free_port_pair
from test_spark_ingest import ROOT, TABLE, _ingest, _log_is_once, _ok, _produce, _rows, _table, _topic

import tablestore
from logstore import broker
from tablestore.cdc.shop import ShopOrders
from tablestore.faults import FAULT_ENV

pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.version_independent]


def _kill_broker(data_dir: Path) -> None:
    state = broker._live_state(broker.run_dir(data_dir))
    assert state is not None, "the test's broker is not running"
    os.kill(state.pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while broker._alive(state.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    (broker.run_dir(data_dir) / "state.json").unlink(missing_ok=True)


def _wait_for_rows(warehouse: Path, expected: list[dict[str, object]], proc: subprocess.Popen[str],
                   timeout_s: float) -> bool:
    """True once the table holds `expected`; False if the job ended first or the time ran out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        cat = tablestore.Catalog(str(warehouse))
        if cat.table_exists(TABLE) and _rows(cat.get_table(TABLE)) == expected:
            return True
        if proc.poll() is not None:
            return False
        time.sleep(1)
    return False


@pytest.mark.timeout(1200)
def test_a_broker_that_goes_away_and_comes_back_loses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data_dir, port = tmp_path / "kafka", free_port_pair()
    monkeypatch.delenv("TABLESTORE_KAFKA_CONTROLLER_PORT", raising=False)
    bootstrap = broker.start(data_dir, port=port)
    warehouse = tmp_path / "wh"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop(FAULT_ENV, None)
    out_file, err_file = (tempfile.TemporaryFile("w+") for _ in range(2))   # files: a full pipe blocks the job
    proc: subprocess.Popen[str] | None = None
    try:
        topic = _topic(bootstrap)
        shop = ShopOrders(keys=80, key_change_ratio=0.02)
        _produce(bootstrap, topic, shop.events(200))
        proc = subprocess.Popen(
            [sys.executable, "-m", "tablestore.cli", "ingest", TABLE, "--topic", topic, "--bootstrap-servers",
             bootstrap, "--warehouse", str(warehouse), "--create", "--master", "local[2]", "--conf",
             "spark.sql.shuffle.partitions=2", "--table-option", "bucket=2", "--trigger-interval", "1s",
             "--progress-every", "5"],
            env=env, start_new_session=True, stdout=out_file, stderr=err_file, text=True)
        assert _wait_for_rows(warehouse, shop.expected_rows(), proc, 300), _tail(err_file)

        _kill_broker(data_dir)            # the broker goes away while the job runs its triggers
        time.sleep(15)
        bootstrap = broker.start(data_dir, port=port)   # ... and comes back on its data
        _produce(bootstrap, topic, shop.events(200))

        if _wait_for_rows(warehouse, shop.expected_rows(), proc, 240):
            proc.send_signal(signal.SIGTERM)   # it waited and retried: it stops cleanly as ever
            assert proc.wait(timeout=120) == 0, _tail(err_file)
        else:
            # it gave up: a message that names Kafka, an exit code that is not 0; a restart resumes
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                pytest.fail(f"the job neither caught up nor failed after the broker came back:\n{_tail(err_file)}")
            assert proc.returncode != 0
            assert "kafka" in _tail(err_file).lower(), _tail(err_file)
            _ok(_ingest(warehouse, topic, bootstrap, "--available-now"))
        table = _table(warehouse)
        assert _rows(table) == shop.expected_rows()
        _log_is_once(table, bootstrap)
    finally:
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out_file.close()
        err_file.close()
        broker.stop(data_dir)


def _tail(err_file: IO[str]) -> str:
    err_file.seek(0)
    return err_file.read()[-4000:]
