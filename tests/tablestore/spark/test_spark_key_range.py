"""A key range on a compacted table reads the row groups that can hold it, not the whole bucket: through
`format("managed")` and through the SQL catalog, the JVM's raw-split reader skips row groups by their statistics
(jvm/read/ParquetPredicates.java), and the Python reader does the same for the splits it reads."""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("day", pa.date32()),
                    ("v", pa.float64())])
ROWS = 200_000   # four row groups of 65,536 rows per file (filestore.datafile.ROW_GROUP_ROWS)
_names = itertools.count()


def _compacted_table(warehouse: Path) -> tablestore.Table:
    catalog = tablestore.Catalog(str(warehouse))
    catalog.create_database("kr", ignore_if_exists=True)
    table = catalog.create_table(f"kr.t{next(_names)}", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    ids = pa.array(range(ROWS), pa.int64())
    rows = pa.table({"id": ids, "name": pa.compute.cast(ids, pa.string()),
                     "day": pa.array([i % 3000 for i in range(ROWS)], pa.int32()).cast(pa.date32()),
                     "v": pa.compute.cast(ids, pa.float64())}, schema=SCHEMA)
    table.write(rows.slice(0, ROWS // 2))
    table.write(rows.slice(ROWS // 2))
    table.compact(full=True)   # one sorted run: a raw split, read by Spark's Parquet reader
    return table


def _scanned_rows(df: Any) -> tuple[list[Any], int]:
    """The query's rows, and how many rows its scan produced (before Spark's filter)."""
    rows = df.collect()
    plan = df._jdf.queryExecution().executedPlan()
    leaves = plan.collectLeaves()
    scanned = sum(leaves.apply(i).metrics().apply("numOutputRows").value() for i in range(leaves.size()))
    return rows, scanned


@pytest.mark.parametrize("condition, expected", [
    ("id < 1000", set(range(1000))),
    ("id >= 150000 AND id < 150010", set(range(150_000, 150_010))),
    ("id = 70000 OR id = 70001", {70_000, 70_001}),
    ("id IN (5, 199999)", {5, 199_999}),
    ("name = '123'", {123}),   # a string column: its statistics are the footer's (string order)
])
def test_a_key_range_reads_only_the_row_groups_that_can_hold_it(
        spark: Any, spark_warehouse: Path, condition: str, expected: set[int]) -> None:
    table = _compacted_table(spark_warehouse)
    df = spark.read.format("managed").load(table.name).filter(condition)
    rows, scanned = _scanned_rows(df)
    assert {r.id for r in rows} == expected
    groups = 2 if "IN" in condition or "name" in condition else 1
    assert scanned <= groups * 65_536 < ROWS, (condition, scanned)

    rows, scanned = _scanned_rows(spark.sql(f"SELECT * FROM managed.{table.name} WHERE {condition}"))
    assert {r.id for r in rows} == expected and scanned <= groups * 65_536, (condition, scanned)


def test_filters_the_statistics_cannot_use_still_give_every_matching_row(spark: Any, spark_warehouse: Path) -> None:
    table = _compacted_table(spark_warehouse)
    df = spark.read.format("managed").load(table.name)
    assert df.filter("id % 50000 = 0").count() == 4   # no predicate for Parquet: every row group, Spark filters
    assert df.filter("id < 100 OR v > 199997.5").count() == 102   # both sides translate
    assert df.filter("id < 100 OR name LIKE '1999%'").count() == 100 + 111   # one side does not: all row groups
    assert df.filter("day = DATE'1970-01-02' AND id < 7000").count() == 3   # ids 1, 3001, 6001
    assert df.filter("v < 0.5").count() == 1


def test_a_range_spanning_partitions_of_the_python_reader_gives_the_same_rows(
        spark: Any, spark_warehouse: Path) -> None:
    """A bucket that needs a merge is read by Python, with the same filter, beside raw splits of other buckets."""
    catalog = tablestore.Catalog(str(spark_warehouse))
    catalog.create_database("kr", ignore_if_exists=True)
    table = catalog.create_table(f"kr.t{next(_names)}", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    rows = [{"id": i, "name": str(i), "day": None, "v": float(i)} for i in range(3000)]
    table.write(pa.Table.from_pylist(rows, schema=SCHEMA))
    table.compact(full=True)
    table.write(pa.Table.from_pylist([{"_row_kind": "-D", **rows[10]}, {"_row_kind": "+U", **rows[11], "v": -1.0}]))
    got = spark.read.format("managed").load(table.name).filter("id < 20 AND v < 100").collect()
    assert sorted((r.id, r.v) for r in got) == [(i, -1.0 if i == 11 else float(i)) for i in range(20) if i != 10]
