"""The Delta Lake view (filestore.views.delta) read by delta-spark: the latest version and every `VERSION AS OF`
read exactly as the table reads the snapshot they publish, with deletion vectors, a partition with a null value, a
column added, a compaction and a checkpoint; the data files' system columns are not in the view."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from dv_tables import SCHEMA, deletes, normalized, rows
from tablestore.spark.delta import DELTA_BUILDS, spark_minor

pytestmark = [pytest.mark.spark,
              pytest.mark.version_independent,   # Delta beside tablestore, on the default PySpark
              pytest.mark.skipif(spark_minor() not in DELTA_BUILDS,
                                 reason=f"no Delta Lake build for PySpark {spark_minor()} (docs/spark.md)")]

DV = {"deletion-vectors.enabled": "true", "metadata.delta.enabled": "true", "log.system": "none", "bucket": "2"}


def spark_rows(spark: Any, path: str, version: int | None = None) -> tuple[list[str], list[dict[str, Any]]]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    df = reader.load(path)
    return df.columns, [r.asDict() for r in df.collect()]


def assert_spark_matches(spark: Any, table: tablestore.Table, snapshot_id: int | None = None) -> None:
    columns, got = spark_rows(spark, table.path, None if snapshot_id is None else snapshot_id - 1)
    want = table.read(snapshot_id=snapshot_id)
    assert not {"_SEQUENCE_NUMBER", "_VALUE_KIND", "_VALUE_COUNT"} & set(columns)
    common = [c for c in want.column_names if c in columns]
    if snapshot_id is None:
        assert sorted(common) == sorted(table.schema.names) == sorted(columns)
    assert normalized(got, common) == normalized(want, common)


@pytest.fixture
def delta_spark(spark: Any) -> Any:
    if "delta" not in spark.conf.get("spark.sql.extensions", ""):
        pytest.skip("the session has no Delta Lake (mvn could not fetch its jars)")
    return spark


def test_delta_spark_reads_every_version_with_vectors(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(50), 1))
    t.write(rows(range(0, 50, 3), 2))
    t.write(deletes(list(range(0, 50, 7))))
    t.compact(full=False)
    compacted = t.latest_snapshot_id()
    t = cat.alter_table("db.t", add_columns=[pa.field("w", pa.int64())])
    t.write(rows(range(45, 60), 3, t.schema))
    t.write(deletes([46, 47], t.schema))
    added = t.latest_snapshot_id()
    for i in range(8):   # past version 10: a checkpoint
        t.write(rows(range(i, i + 3), 10 + i, t.schema))
    latest = t.latest_snapshot_id()
    assert latest is not None and latest > 11
    assert (Path(t.path) / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    assert_spark_matches(spark, t)
    # delta-spark builds each version's state with a Spark job (seconds each): the versions that differ in kind
    for sid in sorted({1, 3, compacted, added}):  # type: ignore[type-var]
        assert_spark_matches(spark, t, sid)
    # SQL time travel, and the history names our snapshots
    n = spark.sql(f"SELECT count(*) AS n FROM delta.`{t.path}` VERSION AS OF 2").collect()[0]["n"]
    assert n == len(t.read(snapshot_id=3))
    history = spark.sql(f"DESCRIBE HISTORY delta.`{t.path}`").select("version", "operation").collect()
    assert sorted(r["version"] for r in history) == list(range(latest))
    # the log before the checkpoint is not needed
    for p in (Path(t.path) / "_delta_log").glob("*.json"):
        if int(p.name[:20]) < 10:
            p.unlink()
    assert_spark_matches(spark, t)


def test_delta_spark_reads_partitions_with_a_null_value(delta_spark: Any, tmp_path: Path) -> None:
    spark = delta_spark
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([*SCHEMA, ("p", pa.string())])
    t = cat.create_table("db.t", schema=schema, partition_by=["p"],
                         options={"metadata.delta.enabled": "true", "log.system": "none", "bucket": "1"})
    ps = ["a", None, "x y:%z"]
    t.write(rows(range(9), 1, schema, p=[ps[i % 3] for i in range(9)]))
    t.write(rows(range(9, 12), 2, schema, p=[None, "b", "a"]))
    for i in range(10):  # past version 10: the checkpoint holds partition values, null ones too
        t.write(rows([100 + i], 3 + i, schema, p=[ps[i % 3]]))
    assert (Path(t.path) / "_delta_log" / f"{10:020d}.checkpoint.parquet").exists()
    assert_spark_matches(spark, t)
    assert_spark_matches(spark, t, 1)
    nulls = spark.read.format("delta").load(t.path).where("p IS NULL").count()
    assert nulls == sum(1 for p in t.read().column("p").to_pylist() if p is None) == 7
