"""The SQL operations from PySpark's own `bin/spark-sql` shell, started with `tablestore.spark.spark_sql_args`: one
script (one JVM) with ALTER TABLE ... COMPACT, DESCRIBE DETAIL, CALL compact / expire_snapshots, SHOW PROCEDURES, the
system tables, DELETE FROM and UPDATE."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tablestore
from tablestore.spark import spark_sql_args
from tablestore.spark.shell import spark_sql_executable

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE DATABASE IF NOT EXISTS managed.db;
CREATE TABLE managed.db.orders (id BIGINT NOT NULL, dt STRING NOT NULL, amount DOUBLE,
  PRIMARY KEY (id, dt) NOT ENFORCED) PARTITIONED BY (dt) TBLPROPERTIES ('bucket' = '1', 'write-only' = 'true');
INSERT INTO managed.db.orders VALUES (1, '2024-01-01', 1.0), (2, '2024-01-02', 2.0);
INSERT INTO managed.db.orders VALUES (3, '2024-01-01', 3.0), (4, '2024-01-02', 4.0);
INSERT INTO managed.db.orders VALUES (5, '2024-01-01', 5.0), (7, '2024-01-02', 7.0);
SELECT 'files', count(*) FROM managed.db.`orders$files`;
ALTER TABLE managed.db.orders PARTITION (dt = '2024-01-01') COMPACT;
describe detail managed.db.orders partition (dt = '2024-01-01');
DESCRIBE DETAIL managed.db.orders;
CALL managed.system.compact(table => 'db.orders', partitions => 'dt=2024-01-02');
CALL managed.system.expire_snapshots(table => 'db.orders', retain_last => 2);
SELECT 'snapshots', snapshot_id, kind FROM managed.db.`orders$snapshots` ORDER BY snapshot_id;
SHOW PROCEDURES IN managed.system;
DELETE FROM managed.db.orders WHERE id = 7;
SELECT 'rows', id FROM managed.db.orders ORDER BY id;
UPDATE managed.db.orders SET amount = 0 WHERE id = 1;
"""


@pytest.mark.version_independent
def test_operations_from_the_spark_sql_shell(tmp_path: Path) -> None:
    try:
        executable = spark_sql_executable()
    except tablestore.TableStoreError as e:
        pytest.skip(str(e))
    warehouse = tmp_path / "wh"
    script = tmp_path / "ops.sql"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([str(executable), *spark_sql_args(warehouse=str(warehouse)),
                           "--conf", "spark.ui.enabled=false", "-f", str(script)],
                          capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)
    lines = [line.split("\t") for line in done.stdout.splitlines()]

    def tagged(tag: str) -> list[list[str]]:
        return [line[1:] for line in lines if line[0] == tag]

    assert tagged("files") == [["6"]]
    compacts = [line for line in lines if line[0] == "db.orders" and len(line) == 11]   # ALTER ... COMPACT, CALL
    assert [(c[1], c[2], c[3], c[4], c[5]) for c in compacts] == [
        ("4", "true", "dt=2024-01-01", "3", "1"), ("5", "true", "dt=2024-01-02", "3", "1")]
    assert ["db.orders", "dt=2024-01-01", "1"] in [line[:3] for line in lines if len(line) == 8]  # DESCRIBE DETAIL
    [detail] = [line for line in lines if line[0] == "db.orders" and len(line) == 20]   # ... of the table
    assert detail[1:5] == [str(warehouse / "db.db" / "orders"), "parquet", "1", '["id","dt"]']
    assert (detail[11], detail[14], detail[18]) == ("4", "4", "false")   # snapshot 4, 4 files, not all compacted
    assert ["3", "9", "[1,2,3]"] in lines   # expire_snapshots(retain_last => 2) of snapshots 1-5
    assert tagged("snapshots") == [["4", "COMPACT"], ["5", "COMPACT"]]
    assert [line[-1] for line in lines if line[0] == "managed"] == [
        "compact", "expire_snapshots", "expire_partitions", "describe_detail", "create_tag", "delete_tag",
        "reset_consumer"]
    assert tagged("rows") == [["1"], ["2"], ["3"], ["4"], ["5"]]   # 7 deleted
    assert done.returncode == 0, done.stderr[-3000:]
    table = tablestore.Catalog(str(warehouse)).get_table("db.orders")
    rows = {r["id"]: r["amount"] for r in table.read().to_pylist()}   # the Python API sees the shell's work
    assert rows == {1: 0.0, 2: 2.0, 3: 3.0, 4: 4.0, 5: 5.0}   # 7 deleted, 1 updated
