"""A managed table and a Delta table in one Spark session, joined (Delta from delta-spark + Maven Central)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.spark.delta import DELTA_BUILDS, spark_minor

pytestmark = [pytest.mark.spark,
              pytest.mark.version_independent,   # Delta beside tablestore, on the default PySpark: Delta's own builds cover other Sparks
              pytest.mark.skipif(spark_minor() not in DELTA_BUILDS,
                                 reason=f"no Delta Lake build for PySpark {spark_minor()} (docs/spark.md)")]


def test_a_managed_and_a_delta_table_join_in_one_session(spark: Any, tmp_path: Path) -> None:
    if "delta" not in spark.conf.get("spark.sql.extensions", ""):
        pytest.skip("the session has no Delta Lake (mvn could not fetch its jars)")
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("amount", pa.int64())])
    cat.create_table("db.orders", schema, primary_key=["id"], options={"bucket": "2"})
    orders = spark.createDataFrame([(i, i * 10) for i in range(6)], "id long, amount long")
    orders.write.format("managed").option("warehouse", str(tmp_path / "wh")).mode("append").save("db.orders")
    customers = str(tmp_path / "delta" / "customers")
    spark.createDataFrame([(i, f"c{i}") for i in range(0, 6, 2)], "id long, name string") \
        .write.format("delta").save(customers)

    managed = spark.read.format("managed").option("warehouse", str(tmp_path / "wh")).load("db.orders")
    joined = managed.join(spark.read.format("delta").load(customers), "id").orderBy("id")
    assert [tuple(r) for r in joined.collect()] == [(0, 0, "c0"), (2, 20, "c2"), (4, 40, "c4")]

    # and back: the join written to the managed table, read by the Python API
    cat.create_table("db.enriched", pa.schema([pa.field("id", pa.int64(), False), ("amount", pa.int64()),
                                               ("name", pa.string())]), primary_key=["id"])
    joined.write.format("managed").option("warehouse", str(tmp_path / "wh")).mode("append").save("db.enriched")
    assert cat.get_table("db.enriched").read().sort_by("id").column("name").to_pylist() == ["c0", "c2", "c4"]
