"""A catalog table's batch scan whose every split the JVM reads (raw: a compacted bucket; merged: a bucket of several
sorted runs of a deduplicating table, read/MergeSplits.java) is planned by the catalog service, with no Python worker
(ManagedScan.Builder, tablestore/spark/read.py `plan_in_service`), and reads what Spark's own evaluation of the same
query over the same rows gives; any other scan (a bucket Python must merge) is planned by the Python source as
before."""
from __future__ import annotations

import datetime as dt
import itertools
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("region", pa.string(), False), ("n", pa.int32()),
                    ("name", pa.string()), ("day", pa.date32()), ("amount", pa.decimal128(10, 2)),
                    ("flag", pa.bool_()), ("v", pa.float64())])
ROWS = 3000
SERVICE = "planned by the catalog service"
_names = itertools.count()


def _name(i: int) -> str | None:
    return None if i % 11 == 0 else f"name-{i}"


def _rows(start: int, count: int) -> pa.Table:
    ids = range(start, start + count)
    return pa.Table.from_pylist([{
        "id": i, "region": "eu" if i % 3 else "us", "n": None if i % 7 == 0 else i % 100,
        "name": _name(i), "day": dt.date(2024, 1, 1) + dt.timedelta(days=i % 60),
        "amount": Decimal(i) / 4, "flag": i % 2 == 0, "v": float("nan") if i % 13 == 0 else i / 3,
    } for i in ids], schema=SCHEMA)


def _table(warehouse: Path, **options: str) -> tablestore.Table:
    catalog = tablestore.Catalog(str(warehouse))
    catalog.create_database("sp", ignore_if_exists=True)
    return catalog.create_table(f"sp.t{next(_names)}", SCHEMA, primary_key=["id", "region"],
                                partition_by=["region"], options={"bucket": "2", **options})


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _sorted(rows: list[Any]) -> list[tuple[Any, ...]]:
    """The rows in one order, NaN as a string (NaN != NaN)."""
    return sorted((tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r) for r in rows), key=repr)


CONDITIONS = [
    "id < 100", "id >= 2990", "id = 1500 OR id = 7", "id IN (3, 4, 2999)", "NOT id IN (3, 4)",
    "region = 'us'", "region = 'us' AND id BETWEEN 10 AND 40", "region <> 'eu' AND n > 90",
    "n IS NULL", "n IS NOT NULL AND n <= 1", "name = 'name-42'", "name LIKE 'name-29%'", "name LIKE '%-7'",
    "name IS NULL AND region = 'eu'", "day = DATE'2024-01-05'", "day > DATE'2024-02-25'",
    "amount > 700.5", "amount = 0.25", "flag AND id < 20", "NOT flag AND id < 20", "v > 990", "v < 1",
    "isnan(v)", "id <=> 5", "NOT (id > 10)",
]


@pytest.mark.parametrize("layout", ["compacted", "two runs", "partial-update"])
def test_a_table_the_jvm_reads_is_planned_by_the_catalog_service_and_every_table_reads_what_spark_computes(
        spark: Any, spark_warehouse: Path, layout: str) -> None:
    """Compacted: every bucket one sorted run, all splits raw. Two runs: two sorted runs per bucket, merged in the
    JVM. Both planned by the service. Partial-update: two runs per bucket that Python's merge reads, planned by the
    Python source with the filters it was pushed, unless a key range misses one of a bucket's runs."""
    engine = {"merge-engine": "partial-update"} if layout == "partial-update" else {}
    table = _table(spark_warehouse, **{"write-only": "true", **engine})   # no compaction but the test's
    compacted = layout == "compacted"
    rows = _rows(0, ROWS)
    table.write(rows.slice(0, ROWS // 2))
    table.write(rows.slice(ROWS // 4))   # overlapping keys: rewritten rows, the same values
    if compacted:
        table.compact(full=True)
    spark.createDataFrame([tuple(r.values()) for r in rows.to_pylist()], schema=spark.table(f"managed.{table.name}").schema) \
        .createOrReplaceTempView("service_plan_truth")
    python_planned = 0
    for condition in CONDITIONS:
        df = spark.sql(f"SELECT * FROM managed.{table.name} WHERE {condition}")
        truth = spark.sql(f"SELECT * FROM service_plan_truth WHERE {condition}").collect()
        assert _sorted(df.collect()) == _sorted(truth), condition
        assert (layout != "partial-update") <= (SERVICE in _plan(df)), condition
        python_planned += SERVICE not in _plan(df)
    # partial-update: the key ranges that miss one run of a bucket are raw, the others merged by Python
    assert (python_planned == 0) == (layout != "partial-update")
    whole = _plan(spark.sql(f"SELECT * FROM managed.{table.name}"))
    if layout != "partial-update":
        assert ("(4 raw splits, 0 merged" in whole) == compacted, whole
        assert ("(0 raw splits, 4 merged" in whole) == (not compacted), whole
    counted = spark.sql(f"SELECT region, count(*) FROM managed.{table.name} GROUP BY region").collect()
    assert sorted(tuple(r) for r in counted) == [("eu", 2000), ("us", 1000)]


def test_time_travel_and_a_table_that_needs_a_merge(spark: Any, spark_warehouse: Path) -> None:
    table = _table(spark_warehouse)
    table.write(_rows(0, 100))
    table.compact(full=True)
    compacted = table.latest_snapshot_id()
    table.write(pa.Table.from_pylist([{"_row_kind": "-D", **_rows(5, 1).to_pylist()[0]},
                                      {"_row_kind": "+U", **_rows(6, 1).to_pylist()[0], "name": "changed"}]))
    # buckets of two sorted runs (one holding a delete): merged in the JVM
    df = spark.sql(f"SELECT id, name FROM managed.{table.name} WHERE id < 8")
    assert _sorted(df.collect()) == [(i, "changed" if i == 6 else _name(i)) for i in range(8) if i != 5]
    assert SERVICE in _plan(df) and "0 merged in the JVM" not in _plan(df)
    # the compacted snapshot is read as it was, planned by the service
    old = spark.sql(f"SELECT id, name FROM managed.{table.name} VERSION AS OF {compacted} WHERE id < 8")
    assert _sorted(old.collect()) == [(i, _name(i)) for i in range(8)]
    assert SERVICE in _plan(old)
    table.compact(full=True)
    again = spark.sql(f"SELECT id, name FROM managed.{table.name} WHERE id < 8")
    assert _sorted(again.collect()) == [(i, "changed" if i == 6 else _name(i)) for i in range(8) if i != 5]
    assert SERVICE in _plan(again)


def test_read_errors_of_a_compacted_table_are_the_python_sources(spark: Any, spark_warehouse: Path) -> None:
    table = _table(spark_warehouse)
    table.write(_rows(0, 10))
    table.compact(full=True)
    with pytest.raises(Exception, match=f"table '{table.name}': unknown read option 'snapshot-idd' "
                                        "\\(did you mean 'snapshot-id'\\?\\)"):
        spark.read.option("snapshot-idd", "1").table(f"managed.{table.name}").collect()
    with pytest.raises(Exception, match="snapshot 99"):
        spark.sql(f"SELECT * FROM managed.{table.name} VERSION AS OF 99").collect()


@pytest.mark.parametrize("compacted", [True, False])
def test_each_query_of_one_dataframe_is_planned_with_its_own_filters(
        spark: Any, spark_warehouse: Path, compacted: bool) -> None:
    """`format("managed")` and the catalog alike: a DataFrame queried with a key range, then whole, then with another
    range, gives each query's rows (a plan pruned by the first query's filter is not reused: two runs of disjoint
    keys, so that a pruned plan would miss one)."""
    table = _table(spark_warehouse, **{"write-only": "true"})
    table.write(_rows(0, 1000))
    table.write(_rows(1000, 1000))
    if compacted:
        table.compact(full=True)
    for df in (spark.read.format("managed").load(table.name), spark.table(f"managed.{table.name}")):
        assert df.filter("id < 100").count() == 100
        assert df.count() == 2000
        assert df.filter("id >= 1500").count() == 500
        assert df.count() == 2000
        assert SERVICE in _plan(df.filter("id < 100"))   # one sorted run in range: planned by the service


def test_format_load_gives_the_schema_the_sql_catalog_gives_and_sees_a_new_column(
        spark: Any, spark_warehouse: Path) -> None:
    """`format("managed").load()` takes its schema from the catalog service (the Python source's function): the
    same as the SQL catalog's, nullability included, and a column added since is there at the next load."""
    table = _table(spark_warehouse)
    table.write(_rows(0, 10))
    df = spark.read.format("managed").load(table.name)
    assert df.schema == spark.table(f"managed.{table.name}").schema
    assert [f.nullable for f in df.schema.fields][:2] == [False, False]
    spark.sql(f"ALTER TABLE managed.{table.name} ADD COLUMNS (extra STRING)")
    again = spark.read.format("managed").load(table.name)
    assert again.schema.fieldNames() == [*SCHEMA.names, "extra"]
    assert again.where("extra IS NULL").count() == 10
