"""The managed catalog from PySpark's own `bin/spark-sql` (a JVM-only shell), started by `tablestore sql -f`, i.e.
with `tablestore.spark.spark_sql_args(...)`; one shell run (a JVM start costs many seconds on 2 cores)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore.spark import spark_sql_args

pytestmark = pytest.mark.spark

SCRIPT = """
CREATE DATABASE IF NOT EXISTS managed.db;
CREATE TABLE managed.db.orders (
  id BIGINT NOT NULL, dt STRING NOT NULL, amount DECIMAL(10,2), note STRING COMMENT 'free text',
  PRIMARY KEY (id, dt) NOT ENFORCED)
PARTITIONED BY (dt) COMMENT 'orders' TBLPROPERTIES ('log.consistency' = 'eventual');
INSERT INTO managed.db.orders VALUES (1, 'a', 1.5, 'x'), (2, 'b', 2.5, 'y'), (11, 'a', 3.5, 'z');
INSERT OVERWRITE managed.db.orders PARTITION (dt = 'b') SELECT 3, 4.5, 'w';
SELECT concat('row:', id, ':', dt, ':', amount) FROM managed.db.orders WHERE id > 1 ORDER BY id;
SELECT concat('count:', count(*)) FROM managed.db.from_python;
SHOW TABLES IN managed.db;
DESCRIBE TABLE EXTENDED managed.db.orders;
SHOW CREATE TABLE managed.db.orders;
ALTER TABLE managed.db.orders SET TBLPROPERTIES ('snapshot.num-retained.max' = '20');
DROP TABLE managed.db.from_python;
SET spark.sql.catalog.managed.table-storage.bucket = 4;
CREATE TABLE managed.db.scratch (id BIGINT);
CREATE TABLE managed.db.t2 (id BIGINT NOT NULL, v STRING) TBLPROPERTIES ('primary-key' = 'id');
DROP TABLE IF EXISTS managed.db.scratch;
SHOW TABLES IN managed.db;
"""


def test_spark_sql_args_configure_the_catalog(tmp_path: Path) -> None:
    args = spark_sql_args(warehouse=str(tmp_path))
    assert args[0] == "--jars" and Path(args[1]).is_file()
    confs = dict(a.split("=", 1) for a in args[3::2])
    assert confs["spark.sql.catalog.managed"] == "tablestore.spark.jvm.catalog.ManagedCatalog"
    assert confs["spark.sql.catalog.managed.warehouse"] == str(tmp_path)
    assert confs["spark.sql.extensions"] == "tablestore.spark.jvm.catalog.ManagedExtensions"
    assert confs["spark.sql.python.filterPushdown.enabled"] == "true"
    assert confs["spark.pyspark.python"] == sys.executable
    assert set(args[2::2]) == {"--conf"}


def test_a_script_in_pysparks_spark_sql(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    python_side = tablestore.Catalog(warehouse)
    python_side.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False)])
    python_side.create_table("db.from_python", schema, primary_key=["id"]).write(pa.table({"id": [1, 2]},
                                                                                         schema=schema))
    script = tmp_path / "script.sql"
    script.write_text(SCRIPT)
    root = str(Path(__file__).resolve().parents[3])
    pythonpath = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": pythonpath}
    done = subprocess.run([sys.executable, "-m", "tablestore.cli", "sql", "--warehouse", warehouse, "-f", str(script)],
                          capture_output=True, text=True, timeout=540, env=env, cwd=tmp_path)   # its metastore_db
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout.splitlines()
    assert [line for line in out if line.startswith("row:")] == ["row:3:b:4.50", "row:11:a:3.50"]
    assert "count:2" in out                                      # a table the Python API created
    assert out.count("orders") == 2 and out.count("from_python") == 1 and "scratch" not in out
    assert python_side.get_table("db.t2").options["bucket"] == "4"   # the session default SET gave
    described = {line.split("\t")[0].strip(): line.split("\t")[1].strip() for line in out if "\t" in line}
    assert described["Comment"] == "orders" and described["Provider"] == "managed"
    assert described["orders_pk"].startswith("PRIMARY KEY (id, dt) NOT ENFORCED")   # 4.2+: NORELY too
    assert described["note"] == "string"
    text = done.stdout
    assert "PARTITIONED BY (dt)" in text and "CONSTRAINT orders_pk PRIMARY KEY (id, dt) NOT ENFORCED" in text

    assert python_side.list_tables("db") == ["orders", "t2"]    # dropped in SQL: gone for Python too
    orders = python_side.get_table("db.orders")
    assert orders.options["snapshot.num-retained.max"] == "20"   # an option SQL set
    assert sorted(orders.read().column("id").to_pylist()) == [1, 3, 11]


def test_tablestore_sql_is_silent_unless_verbose(tmp_path: Path) -> None:
    from tablestore.spark.shell import spark_sql_command

    quiet = spark_sql_command(warehouse=str(tmp_path), execute="SELECT 1")
    assert "-S" in quiet and any(a.startswith("-Dlog4j2.configurationFile=") for a in quiet)
    loud = spark_sql_command(warehouse=str(tmp_path), execute="SELECT 1", verbose=True)
    assert "-S" not in loud and not any("log4j2" in a for a in loud)


def test_an_error_in_tablestore_sql_is_one_line_and_its_stack_is_in_the_log(tmp_path: Path) -> None:
    from tablestore.spark.shell import log_config

    marker = f"bad_{os.getpid()}_{tmp_path.name}".replace("-", "_")
    statements = (f"CREATE DATABASE managed.db; CREATE TABLE managed.db.{marker} (id BIGINT) "
                  "TBLPROPERTIES ('bukket' = '2')")
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1",
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-m", "tablestore.cli", "sql", "--warehouse", str(tmp_path / "wh"),
                           "-e", statements], capture_output=True, text=True, timeout=540, env=env, cwd=tmp_path)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if not line.startswith("Time taken:")]   # spark-sql's own
    assert lines == ["unknown table option 'bukket' (did you mean 'bucket'?); valid options: " + lines[0].split(
        "valid options: ")[1]], done.stderr[-3000:]
    log = log_config()[1].read_text()
    failed = log[log.index(f"Failed in [ CREATE TABLE managed.db.{marker}"):]
    assert "PythonServiceException: unknown table option 'bukket'" in failed and "\tat " in failed
