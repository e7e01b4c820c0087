"""Spark on an S3 warehouse (a real S3 server: SeaweedFS): the shared session reaches an S3 warehouse through
per-read options and a catalog configured with `SET`. `run_job` / `check_job` run tests/tablestore/spark/s3_job.py
(a session given the catalog's S3 options: SQL DDL and DML, df.write / spark.read, a streaming write, compaction)
in its own process, as test_spark_cluster.py does on a standalone cluster."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tablestore
from s3_server import S3Server

pytestmark = [pytest.mark.s3, pytest.mark.spark, pytest.mark.version_independent]

JOB = Path(__file__).resolve().parent / "s3_job.py"


def run_job(warehouse: str, master: str, options: dict[str, str], work: Path, timeout_s: float = 600) -> dict[str, Any]:
    """Run s3_job.py in its own process (its output in files, not pipes) and return what it printed."""
    work.mkdir(parents=True, exist_ok=True)
    out, err = work / "job.out", work / "job.err"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TABLESTORE_CATALOG_OPTIONS"))}
    with open(out, "wb") as o, open(err, "wb") as e:
        code = subprocess.call([sys.executable, str(JOB), warehouse, master, json.dumps(options), str(work)],
                               stdout=o, stderr=e, env=env, timeout=timeout_s)
    text = out.read_text()
    assert code == 0, f"job failed ({code}):\n{text[-3000:]}\n{err.read_text()[-6000:]}"
    line = next(l for l in text.splitlines() if l.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])  # type: ignore[no-any-return]


def check_job(seen: dict[str, Any]) -> None:
    assert seen["sql"] == [1500, 2500, "u1000"]          # 1000 inserted, 500 of them upserted, 500 new
    assert seen["read"] == 2000                           # + 500 through df.write
    assert seen["after_stream"] == 2300                   # + 300 through the streaming write
    assert seen["after_compact"] == [2300, 2500 + 500 * 3 + 300 * 4]
    assert seen["python_rows"] == 2300
    assert "COMPACT" in seen["kinds"] and "APPEND" in seen["kinds"]


def test_the_shared_session_reads_and_writes_an_s3_warehouse_by_option_and_by_set(
    spark: Any, s3_warehouse: str, s3_server: S3Server
) -> None:
    options = s3_server.catalog_options()
    cat = tablestore.Catalog(s3_warehouse, options=options)
    cat.create_database("db")
    import pyarrow as pa
    cat.create_table("db.t", pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())]),
                     primary_key=["id"])
    writer = spark.range(0, 100).selectExpr("id", "cast(id AS STRING) AS v").write.format("managed")
    for key, value in {"warehouse": s3_warehouse, **options}.items():
        writer = writer.option(key, value)
    writer.mode("append").save("db.t")
    reader = spark.read.format("managed")
    for key, value in {"warehouse": s3_warehouse, **options}.items():
        reader = reader.option(key, value)
    assert reader.load("db.t").count() == 100

    conf = {"spark.sql.catalog.s3wh": "tablestore.spark.jvm.catalog.ManagedCatalog",
            "spark.sql.catalog.s3wh.warehouse": s3_warehouse,
            **{f"spark.sql.catalog.s3wh.{k}": v for k, v in options.items()}}
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        spark.sql("INSERT INTO s3wh.db.t SELECT id, 'sql' FROM range(50, 150)")
        assert [tuple(r) for r in spark.sql("SELECT count(*), count_if(v = 'sql') FROM s3wh.db.t").collect()] == [
            (150, 100)]
    finally:
        for key in conf:
            spark.conf.unset(key)
