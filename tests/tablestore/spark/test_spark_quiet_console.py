"""A quiet console (issue 52): a failed `df.write` in a session tablestore started prints nothing of Spark's on
stderr (its stacks go to the log file), and the CLI prints its error as one line naming that log file, and nothing
else on a run that succeeds."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from test_spark_ingest import ROOT, TABLE, _ingest, _ok, _produce, _topic

from tablestore.cdc.shop import ShopOrders

pytestmark = [pytest.mark.spark]

_FAILED_WRITE = textwrap.dedent("""
    import sys, pyarrow as pa, tablestore, tablestore.spark
    from tablestore.spark import logs
    wh, name = sys.argv[1], sys.argv[2]
    cat = tablestore.Catalog(wh)
    cat.create_database("db")
    cat.create_table(name, pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())]), primary_key=["id"])
    spark = tablestore.spark.session(warehouse=wh, master="local[1]")
    try:
        spark.createDataFrame([(None, "x"), (2, "y")], "id bigint, v string").write.format("managed") \\
            .mode("append").save(name)
    except Exception as e:
        print("ERROR", type(e).__name__, str(e).replace(chr(10), " | "))
    print("LOG", logs.active_log())
""")


def _log_text(log: Path, since: int) -> str:
    with open(log, "rb") as f:
        f.seek(since)
        return f.read().decode(errors="replace")


@pytest.mark.version_independent
@pytest.mark.timeout(300)
def test_a_failed_write_prints_nothing_of_spark_on_stderr(tmp_path: Path) -> None:
    from tablestore.spark.logs import log_config

    log = log_config()[1]
    since = log.stat().st_size if log.exists() else 0
    name = f"db.t_{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop("TABLESTORE_SPARK_LOG", None)
    done = subprocess.run([sys.executable, "-c", _FAILED_WRITE, str(tmp_path / "wh"), name], env=env,
                          capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stderr.splitlines() == []   # no JVM stack, no log4j banner, no pandas FutureWarning
    error = next(line for line in done.stdout.splitlines() if line.startswith("ERROR"))
    assert f"table '{name}': primary-key column 'id' has nulls" in error
    assert f"LOG {log}" in done.stdout
    written = _log_text(log, since)   # the stack is in the log file instead
    assert "TableStoreTaskError" in written and f"table '{name}'" in written and "\tat " in written


@pytest.mark.kafka
@pytest.mark.version_independent
@pytest.mark.timeout(600)
def test_the_cli_prints_nothing_but_its_own_lines_and_an_error_in_one(tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap, partitions=1)
    shop = ShopOrders(keys=20)
    _produce(kafka_bootstrap, topic, shop.events(20))
    ok = _ingest(tmp_path / "wh", topic, kafka_bootstrap, "--create", "--available-now")
    _ok(ok)
    assert ok.stderr.splitlines() == []   # a run that works: nothing on stderr at all

    _produce(kafka_bootstrap, topic, [(ShopOrders.key(1), b'{"before": null, "after": {"order_id": 1, "st')])
    failed = _ingest(tmp_path / "wh", topic, kafka_bootstrap, "--available-now")
    assert failed.returncode == 2
    lines = failed.stderr.splitlines()
    assert len(lines) == 1, failed.stderr[-3000:]
    assert lines[0].startswith(f"error: TABLESTORE_CDC_BAD_RECORD: table {TABLE}: bad debezium-json record in topic "
                               f"{topic} partition 0 offset 20: not valid JSON"), lines[0]
    assert "SQLSTATE" not in lines[0] and "logs/spark.log" in lines[0]
