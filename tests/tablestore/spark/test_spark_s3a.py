"""Spark's JVM on an S3 warehouse through Hadoop's S3A (tablestore/spark/s3a.py): the session gets hadoop-aws of
PySpark's Hadoop version by itself; the JVM writer writes the bucket and the raw-split reader reads it with the rows
the Python paths give (tests/tablestore/spark/s3a_job.py, its own process: a session's jars are fixed when it
starts); streaming checkpoints live in the bucket (a restart resumes from one), `tablestore ingest`'s default one
too. The shared session has no
S3A: tests/tablestore/spark/test_spark_s3.py's per-read options still go through Python there."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest

import logstore
import tablestore
from logstore.kafka import KafkaAdmin
from s3_server import S3Server
from tablestore.cdc.shop import ShopOrders
from tablestore.spark import s3a

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TABLESTORE_CATALOG_OPTIONS"))}


def _names(listed: list[str]) -> list[str]:
    """The names in an S3 listing (S3A leaves a directory marker, `dir/`, which s3fs lists too)."""
    return sorted(n for n in (p.rstrip("/").rsplit("/", 1)[1] for p in listed if not p.endswith("/")) if n)


def test_the_session_settings_add_s3a_only_for_s3(monkeypatch: pytest.MonkeyPatch) -> None:
    jars = [Path("/j/hadoop-aws-3.5.0.jar"), Path("/j/bundle-2.35.4.jar")]
    monkeypatch.setattr(s3a, "s3a_jars", lambda: jars)
    assert s3a.session_settings({"spark.sql.catalog.managed.warehouse": "/tmp/wh"}, None) == {}
    local = s3a.session_settings({"spark.sql.catalog.managed.warehouse": "s3://b/wh"}, "local[2]")
    assert local == {"spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
                     "spark.driver.extraClassPath": os.pathsep.join(map(str, jars))}
    cluster = s3a.session_settings({"spark.hadoop.fs.s3a.endpoint": "http://x", "spark.jars": "/a.jar"},
                                   "spark://m:7077")
    assert cluster["spark.jars"] == ",".join(["/a.jar", *map(str, jars)])   # shipped to the executors
    assert cluster["spark.driver.extraClassPath"] == os.pathsep.join(map(str, jars))
    same_paths = s3a.session_settings({"spark.hadoop.fs.s3a.endpoint": "http://x", "spark.tablestore.s3a.ship": "false"},
                                      "spark://m:7077")   # the workers have the jars at the driver's paths
    assert "spark.jars" not in same_paths
    assert same_paths["spark.executor.extraClassPath"] == os.pathsep.join(map(str, jars))
    assert s3a.session_settings({"spark.sql.catalog.c.warehouse": "s3a://b/wh", "spark.tablestore.s3a": "false"},
                                None) == {}

    def missing() -> list[Path]:
        raise s3a.S3AUnavailableError("no mvn")

    monkeypatch.setattr(s3a, "s3a_jars", missing)   # no jars: the session starts without S3A (Python paths)
    assert s3a.session_settings({"spark.sql.catalog.managed.warehouse": "s3://b/wh"}, None) == {}


def test_urls_and_settings_the_jvm_gets(monkeypatch: pytest.MonkeyPatch) -> None:
    assert s3a.to_s3a("s3://b/wh/x") == "s3a://b/wh/x" and s3a.to_s3a("/tmp/wh") == "/tmp/wh"
    assert s3a.jvm_url(True, "b/wh/db.db/t/bucket-0") == "s3a://b/wh/db.db/t/bucket-0"
    assert s3a.jvm_url(False, "/tmp/wh/t") == "/tmp/wh/t"
    monkeypatch.setenv("TABLESTORE_CATALOG_OPTIONS", json.dumps({"s3.region": "eu-west-1", "s3.endpoint": "http://e"}))
    assert s3a.hadoop_options([("s3.endpoint", "http://mine"), ("table-storage.bucket", "2")]) == {
        "fs.s3a.endpoint": "http://mine", "fs.s3a.endpoint.region": "eu-west-1"}
    assert s3a.hadoop_version().count(".") == 2


@pytest.mark.s3
@pytest.mark.spark
@pytest.mark.version_independent
@pytest.mark.timeout(600)
def test_the_jvm_writes_and_reads_an_s3_warehouse_and_keeps_checkpoints_there(
        s3_warehouse: str, s3_server: S3Server, tmp_path: Path) -> None:
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    with open(out, "wb") as o, open(err, "wb") as e:
        code = subprocess.call([sys.executable, str(HERE / "s3a_job.py"), s3_warehouse,
                                json.dumps(s3_server.catalog_options()), str(tmp_path)],
                               stdout=o, stderr=e, env=_clean_env(), timeout=500)
    text = out.read_text()
    assert code == 0, f"job failed ({code}):\n{text[-3000:]}\n{err.read_text()[-6000:]}"
    seen: dict[str, Any] = json.loads(next(l for l in text.splitlines() if l.startswith("RESULT "))[7:])
    assert seen["s3a"]
    assert seen["creators"] == ["parquet-mr"]   # the JVM writer's files (Python's say parquet-cpp-arrow)
    assert seen["raw_columnar"] and seen["range_columnar"]      # raw splits read by Spark's Parquet reader
    assert seen["range_equals_raw"] and seen["raw_equals_library"] and seen["rows"] == 5000
    assert seen["sql_columnar"] and seen["sql_equals"]
    assert seen["stream_counts"] == [5100, 5200] and seen["appends"] == 3   # one write + one batch per run
    assert seen["merged_in_jvm"] and seen["merged_equals_library"]   # read/MergeSplits.java on S3A
    fs = s3_server.fs()
    checkpoint = s3_warehouse.split("://", 1)[1] + "/_checkpoints/stream"
    assert _names(fs.ls(f"{checkpoint}/commits")) == ["0", "1"]


@pytest.mark.s3
@pytest.mark.spark
@pytest.mark.kafka
@pytest.mark.version_independent
@pytest.mark.timeout(600)
def test_ingest_keeps_its_default_checkpoint_in_the_bucket(
        s3_warehouse: str, s3_server: S3Server, kafka_bootstrap: str) -> None:
    topic = f"cdc-{uuid.uuid4().hex[:8]}"
    KafkaAdmin({"bootstrap.servers": kafka_bootstrap}).create_topic(topic, 2, None)
    shop = ShopOrders(keys=100, key_change_ratio=0.03)
    logstore.produce_raw({"bootstrap.servers": kafka_bootstrap}, topic, shop.events(200))
    env = {**_clean_env(), "TABLESTORE_CATALOG_OPTIONS": json.dumps(s3_server.catalog_options()),
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "tablestore.cli", "ingest", "shop.orders", "--topic", topic, "--bootstrap-servers",
           kafka_bootstrap, "--warehouse", s3_warehouse, "--master", "local[2]", "--conf",
           "spark.sql.shuffle.partitions=2", "--available-now", "--create", "--table-option", "bucket=2"]
    with tempfile.TemporaryFile("w+") as out:   # a file, not a pipe: nobody reads it while the job runs
        code = subprocess.call(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=300)
        out.seek(0)
        assert code == 0, out.read()[-4000:]
    table = tablestore.Catalog(s3_warehouse, options=s3_server.catalog_options()).get_table("shop.orders")
    assert sorted(table.read().to_pylist(), key=lambda r: r["order_id"]) == shop.expected_rows()
    checkpoint = f"{table.path}/checkpoint/ingest-{topic}"   # the default: beside the table, in the bucket
    fs = s3_server.fs()
    assert _names(fs.ls(f"{checkpoint}/commits")) == ["0"] and _names(fs.ls(f"{checkpoint}/offsets")) == ["0"]
    # a restart resuming from a checkpoint in the bucket: s3a_job.py's stream
