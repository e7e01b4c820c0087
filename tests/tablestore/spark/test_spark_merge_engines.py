"""A Spark batch write into a table with a merge engine is merged by it (the Python writer, not the JVM writer, which
only deduplicates), and Spark reads the merged rows back, raw splits included (a bucket of one run after
compaction); the log of such a table holds the merged changes."""
from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore

pytestmark = [pytest.mark.spark, pytest.mark.version_independent]   # the Python writer and the merge: tablestore logic

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("qty", pa.int64()), ("name", pa.string())])


def _frame(spark: Any, rows: pa.Table, tmp_path: Path, name: str) -> Any:
    path = tmp_path / f"{name}.parquet"
    pq.write_table(rows, path)
    return spark.read.parquet(str(path))


@pytest.mark.parametrize("engine, options, want", [
    ("partial-update", {}, [(1, 5, "a"), (2, 2, "b")]),
    ("aggregation", {"fields.qty.aggregate-function": "sum", "fields.name.aggregate-function": "max"},
     [(1, 6, "c"), (2, 2, "b")]),
    ("first-row", {}, [(1, 1, "a"), (2, 2, "b")]),
])
def test_a_spark_write_is_merged_by_the_tables_engine(spark: Any, tmp_path: Path, engine: str,
                                                      options: dict[str, str], want: list[tuple[Any, ...]]) -> None:
    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    table = cat.create_table("db.t", SCHEMA, primary_key=["id"],
                             options={"bucket": "2", "merge-engine": engine, **options})
    first = pa.table({"id": [1, 2], "qty": [1, 2], "name": ["a", "b"]}, schema=SCHEMA)
    second = pa.table({"id": [1], "qty": [5], "name": pa.array(["c"] if engine != "partial-update" else [None],
                                                               pa.string())}, schema=SCHEMA)
    for i, rows in enumerate((first, second)):
        _frame(spark, rows, tmp_path, f"w{i}").write.format("managed").option("warehouse", str(wh)) \
            .mode("append").save("db.t")
    creators = {pq.ParquetFile(f).metadata.created_by.split(" ")[0]
                for f in glob.glob(f"{table.path}/**/data-*", recursive=True)}
    assert creators == {"parquet-cpp-arrow"}  # Python's writer
    assert sorted(tuple(r.values()) for r in table.read().to_pylist()) == want
    table.compact(full=True)  # one run per bucket: Spark may read it raw
    got = spark.read.format("managed").option("warehouse", str(wh)).load("db.t").collect()
    assert sorted((r["id"], r["qty"], r["name"]) for r in got) == want


@pytest.mark.kafka
@pytest.mark.parametrize("producers", ["driver", "executors"])
def test_a_spark_write_logs_the_merged_rows_whoever_produces_the_log(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, producers: str) -> None:
    """The table's log gets the merged result's changelog (tablestore.log_publish.log_changes) whether the driver
    produces it right after the snapshot or the executors do in the log job after it."""
    from tablestore.spark.log_publish import PRODUCERS_CONF

    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh), options={"table-storage.log.properties.bootstrap.servers": kafka_bootstrap})
    cat.create_database("db")
    table = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={
        "bucket": "2", "merge-engine": "partial-update", "log.changelog-mode": "all"})
    sc, jobs = spark.sparkContext, []
    spark.conf.set(PRODUCERS_CONF, producers)
    try:
        for i, rows in enumerate([[(1, 1, "a"), (2, 2, None)], [(1, None, "b"), (2, None, None)]]):
            frame = _frame(spark, pa.table(list(zip(*rows)), schema=SCHEMA), tmp_path, f"w{i}")
            group = f"merged-log-{producers}-{i}"
            sc.setJobGroup(group, "the write")
            try:
                frame.write.format("managed").option("warehouse", str(wh)).mode("append").save("db.t")
            finally:
                sc.setLocalProperty("spark.jobGroup.id", None)
            jobs.append(len(sc.statusTracker().getJobIdsForGroup(group)))
        assert jobs == ([3, 3] if producers == "executors" else [2, 2])   # one more: the log job after the write
        changes = [(r["_row_kind"], r["id"], r["qty"], r["name"]) for b in table.read_changes(
            scan="from-timestamp", timestamp_ms=0, timeout_s=1.0) for r in b.to_pylist()]
        assert sorted(changes) == sorted([("+I", 1, 1, "a"), ("+I", 2, 2, None), ("-U", 1, 1, "a"),
                                          ("+U", 1, 1, "b")])   # key 2's second row changes nothing
        assert table._handle.store.snapshots.latest().log_pending == ()
    finally:
        spark.conf.unset(PRODUCERS_CONF)
        cat.drop_table("db.t")
