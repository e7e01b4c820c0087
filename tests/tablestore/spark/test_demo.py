"""`tablestore demo` end to end, in a process of its own as a user runs it: the default demo (a real PostgreSQL,
Debezium in Kafka Connect, one ingest-database job, the downstream query, every table checked against PostgreSQL)
and `--synthetic` (generated Debezium events, no PostgreSQL). Each must exit 0 with its OK line. Then the demo's
check alone, on values made up to differ (tablestore/demo_postgres_check.py).

The PostgreSQL server and the Connect worker the demo starts listen on the helpers' default ports + 50 + 20*K
(pytest-xdist worker `gwK`, as tests/conftest.py moves the broker; tests/tablestore/spark/pg_source.py takes +30,
tests/tablestore/test_cdc_devtools.py +10..+12), with run directories of their own under /tmp: as root, postgres
runs as an unprivileged user, which must be able to enter every parent of its directory (pytest's are not)."""
from __future__ import annotations

import datetime as dt
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from tablestore.cdc import connect, postgres


ROOT = Path(__file__).resolve().parents[3]
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
SHIFT = 20 * int(_WORKER[2:]) if _WORKER.startswith("gw") else 0
PG_PORT = postgres.DEFAULT_PORT + 50 + SHIFT
CONNECT_PORT = connect.DEFAULT_PORT + 50 + SHIFT


def _demo(*args: str, env: dict[str, str] | None = None, timeout_s: float = 420) -> subprocess.CompletedProcess[str]:
    """`tablestore demo ARGS` in a process group of its own, its output to files (a pipe nobody reads while it runs
    would fill up and block it); the group is killed if it outlives `timeout_s`."""
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   **(env or {})}
    cmd = [sys.executable, "-m", "tablestore.cli", "demo", *args]
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, env=environment, start_new_session=True, stdout=out, stderr=err, text=True)
        try:
            code = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGINT)   # KeyboardInterrupt: the demo's clean-up runs
            try:
                proc.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            code = -1
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(cmd, code, out.read(), err.read())


def _ok(done: subprocess.CompletedProcess[str], line: str) -> None:
    assert done.returncode == 0 and line in done.stdout, \
        f"exit {done.returncode}\n--- stdout\n{done.stdout[-6000:]}\n--- stderr\n{done.stderr[-4000:]}"


def _topics(bootstrap: str) -> set[str]:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=10).topics)


@pytest.fixture
def run_dirs() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="tablestore-demo-test-"))
    base.chmod(0o755)   # postgres's unprivileged user enters it
    try:
        yield base
    finally:
        postgres.stop(base / "postgres")   # only if the demo left them running
        connect.stop(base / "connect")
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.version_independent
@pytest.mark.timeout(600)
def test_the_demo_keeps_a_postgres_database_in_managed_tables_and_cleans_up(kafka_bootstrap: str,
                                                                             run_dirs: Path) -> None:
    pytest.importorskip("psycopg")
    env = {postgres.DIR_ENV: str(run_dirs / "postgres"), connect.DIR_ENV: str(run_dirs / "connect")}
    done = _demo("--seconds", "15", "--rate", "50", "--bootstrap-servers", kafka_bootstrap,
                 "--postgres-port", str(PG_PORT), "--connect-port", str(CONNECT_PORT), env=env)
    try:
        _ok(done, "OK: every table and the downstream revenue equal PostgreSQL")
        report = done.stdout
        for table in ("customers", "products", "orders", "reviews"):
            assert f"table       shop.{table}: " in report
        assert "shop.orders: add column coupon" in report   # the ALTER TABLE half way
        assert re.search(r"TOAST .* placeholder for it in [1-9][\d,]* records", report), report
        # the demo started both servers and stopped them; its connector's topics are gone
        assert "(started: postgres, connect)" in report
        assert postgres.status(run_dirs / "postgres") is None and connect.status(run_dirs / "connect") is None
        prefix = re.search(r"Debezium connector (shopdemo_[0-9a-f]+)", report)
        assert prefix is not None
        assert not {t for t in _topics(kafka_bootstrap) if t.startswith(prefix.group(1) + ".")}
    finally:   # the worker's own topics (a fresh run directory is a new worker: nobody uses them again)
        group = run_dirs / "connect" / "group.id"
        if group.exists():
            from confluent_kafka.admin import AdminClient

            name = group.read_text().strip()
            mine = [t for t in _topics(kafka_bootstrap) if t.startswith(f"{name}-")]
            if mine:
                AdminClient({"bootstrap.servers": kafka_bootstrap, "log_level": 0}).delete_topics(mine)


def test_the_check_names_each_difference_in_a_line_and_takes_values_as_the_table_holds_them() -> None:
    """The demo's oracle comparison alone: a timestamptz in another zone is the same instant, Decimal('1.50') is
    1.5; a missing row, an extra row, a changed value, Debezium's placeholder and a wrong revenue are one line
    each."""
    from tablestore.demo_postgres_check import PLACEHOLDER, Observed, differences, toast_kept

    zone = dt.timezone(dt.timedelta(hours=2))
    columns = ["id", "note", "price", "at"]
    pg_rows = [{"id": i, "note": f"n{i}", "price": Decimal("1.50"), "at": dt.datetime(2024, 1, 1, 12, tzinfo=zone)}
               for i in range(1, 5)]
    utc = dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone.utc)   # the same instant as 12:00 at +02:00
    managed = [{"id": 1, "note": "n1", "price": Decimal("1.5"), "at": utc, "extra": 0},
               {"id": 2, "note": PLACEHOLDER, "price": Decimal("1.50"), "at": pg_rows[1]["at"], "extra": 0},
               {"id": 3, "note": "n3", "price": Decimal("1.51"), "at": pg_rows[2]["at"], "extra": 0},
               {"id": 9, "note": "n9", "price": None, "at": None, "extra": 0}]
    seen = Observed({"t": (columns, pg_rows)}, {"t": ([*columns, "extra"], managed)}, {7: Decimal("3.00")})
    assert differences(seen, "shop", {7: Decimal("3"), 8: Decimal("0")}) == [
        "shop.t id=4: missing (PostgreSQL has it)",
        "shop.t id=9: not in PostgreSQL",
        "shop.t id=2: note holds Debezium's placeholder for an unchanged TOASTed value",
        "shop.t id=3: price is Decimal('1.51'), PostgreSQL has Decimal('1.50')",
    ]
    assert differences(seen, "shop", {7: Decimal("2.99")})[-1] == \
        "revenue of customer 7: the downstream query has 2.99, PostgreSQL 3.00"
    customers = Observed({"customers": (columns, pg_rows)}, {"customers": (columns, managed)}, {})
    assert toast_kept(customers, {1, 2, 3}) == 2
    missing = Observed({"t": (columns, pg_rows)}, {"t": None}, {})
    assert differences(missing, "shop", {}) == ["shop.t: no such managed table (PostgreSQL's has 4 rows)"]
