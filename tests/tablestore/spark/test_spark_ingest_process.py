"""`tablestore ingest` as a process of its own: killed with -9 at each commit point then restarted (the table ends
equal to the source's state, its log holds each change once), and stopped by SIGTERM after the micro-batch in flight.
Apart from tests/tablestore/spark/test_spark_ingest.py (whose helpers these use) so that CI's two workers can run
the slowest ingest tests side by side."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from test_spark_ingest import ROOT, TABLE, _ingest, _log_is_once, _ok, _produce, _rows, _table, _topic

import tablestore
from tablestore.cdc.shop import ShopOrders
from tablestore.faults import FAULT_ENV

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


@pytest.mark.version_independent
@pytest.mark.timeout(1200)
def test_a_job_killed_at_each_commit_point_ends_exactly_once(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap)
    shop = ShopOrders(keys=100, key_change_ratio=0.02)
    _produce(kafka_bootstrap, topic, shop.events(600))
    warehouse = tmp_path / "wh"
    common = ("--create", "--available-now", "--max-offsets-per-trigger", "100", "--table-option", "bucket=2")
    for i, fault in enumerate(("before-snapshot@2", "before-log-commit@2", "after-log-commit@2")):
        done = _ingest(warehouse, topic, kafka_bootstrap, *common, fault=fault, marker=tmp_path / f"fault-{i}")
        assert done.returncode == -9, (fault, done.stderr[-3000:])
    _ok(_ingest(warehouse, topic, kafka_bootstrap, *common))
    table = _table(warehouse)
    assert _rows(table) == shop.expected_rows()
    _log_is_once(table, kafka_bootstrap)


@pytest.mark.version_independent
@pytest.mark.timeout(900)
def test_sigterm_stops_after_the_batch_in_flight(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap)
    shop = ShopOrders(keys=80)
    _produce(kafka_bootstrap, topic, shop.events(200))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop(FAULT_ENV, None)
    out_file, err_file = (tempfile.TemporaryFile("w+") for _ in range(2))   # files: a full pipe blocks the job
    proc = subprocess.Popen(
        [sys.executable, "-m", "tablestore.cli", "ingest", TABLE, "--topic", topic, "--bootstrap-servers",
         kafka_bootstrap, "--warehouse", str(tmp_path / "wh"), "--create", "--master", "local[2]",
         "--progress-every", "1", "--trigger-interval", "500ms"],
        env=env, start_new_session=True, stdout=out_file, stderr=err_file, text=True)

    def err_tail() -> str:
        err_file.seek(0)
        return err_file.read()[-3000:]

    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            cat = tablestore.Catalog(str(tmp_path / "wh"))
            if cat.table_exists(TABLE) and cat.get_table(TABLE).snapshots():
                break
            assert proc.poll() is None, err_tail()
            time.sleep(0.5)
        _produce(kafka_bootstrap, topic, shop.events(100))
        time.sleep(2)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
        out_file.seek(0)
        err_file.seek(0)
        out, err = out_file.read(), err_file.read()
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out_file.close()
        err_file.close()
    assert proc.returncode == 0, err[-3000:]
    assert "stopping after the micro-batch in flight" in err
    assert "events (" in out and "ingested" in out   # progress lines, then the summary
    # whatever was committed is whole: a restart takes the rest, exactly once
    _ok(_ingest(tmp_path / "wh", topic, kafka_bootstrap, "--available-now"))
    assert _rows(_table(tmp_path / "wh")) == shop.expected_rows()
