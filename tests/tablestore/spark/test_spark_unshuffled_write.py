"""A Spark batch write without the shuffle by bucket (`sink.shuffle-by-bucket` = false; BucketFanOut.java): each
task writes a sorted run into every bucket its rows fall in. The table then holds what a plain dict replay of the
rows in input order holds (a key two tasks both hold keeps the later task's row), with one run per task and bucket;
the write option overrides the table's; the writes it cannot apply to are shuffled by bucket as before."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), ("s", pa.string())])
KEYS = 1000


def _rows(spark: Any, n: int, tasks: int) -> Any:
    """`n` rows in `tasks` input partitions, row x (0 <= x < n) in partition x * tasks // n, of key x * 7919 % KEYS
    (keys repeat within and across partitions), v = x."""
    return spark.range(0, n, 1, tasks).selectExpr(f"id * 7919 % {KEYS} AS id", "id AS v", "concat('r', id) AS s")


def _replay(n: int) -> dict[int, tuple[int, str]]:
    """The oracle: the rows applied in input order to a dict, per key the last."""
    out: dict[int, tuple[int, str]] = {}
    for x in range(n):
        out[x * 7919 % KEYS] = (x, f"r{x}")
    return out


def _table_rows(table: Any) -> dict[int, tuple[int, str]]:
    return {r["id"]: (r["v"], r["s"]) for r in table.read().to_pylist()}


def _writers(table: Any) -> set[str]:
    """Who wrote the table's live files: parquet-mr (the JVM writer) or parquet-cpp-arrow (Python's)."""
    store = table._handle.store
    return {pq.ParquetFile(store.data_file_path(e.partition, e.bucket, e.file.file_name)).metadata.created_by
            .split(" ")[0] for e in store.live_entries(store.snapshots.latest()).values()}


def _files_per_bucket(table: Any) -> dict[int, int]:
    store = table._handle.store
    out: dict[int, int] = {}
    for e in store.live_entries(store.snapshots.latest()).values():
        out[e.bucket] = out.get(e.bucket, 0) + 1
    return dict(sorted(out.items()))


def _catalog(tmp_path: Path) -> tuple[str, Any]:
    wh = str(tmp_path / "wh")
    cat = tablestore.Catalog(wh)
    cat.create_database("db")
    return wh, cat


def test_each_task_writes_a_run_into_every_bucket_and_the_later_task_wins(spark: Any, tmp_path: Path) -> None:
    wh, cat = _catalog(tmp_path)
    table = cat.create_table("db.t", SCHEMA, primary_key=["id"],
                             options={"bucket": "3", "sink.shuffle-by-bucket": "false", "write-only": "true"})
    n = 20_000
    _rows(spark, n, 4).write.format("managed").option("warehouse", wh).mode("append").save("db.t")
    assert _files_per_bucket(table) == {0: 4, 1: 4, 2: 4}   # a run per task and bucket: no shuffle
    assert _writers(table) == {"parquet-mr"}                 # written by the JVM writer
    assert table.latest_snapshot_id() == 1                   # one commit
    assert _table_rows(table) == _replay(n)
    spark_rows = spark.read.format("managed").option("warehouse", wh).load("db.t").collect()
    assert {r.id: (r.v, r.s) for r in spark_rows} == _replay(n)
    # a second write on top: its rows win over the first's, whatever task holds them
    _rows(spark, 500, 2).selectExpr("id", "v + 1000000 AS v", "s").write.format("managed") \
        .option("warehouse", wh).mode("append").save("db.t")
    expected = _replay(n)
    expected.update({k: (v + 1_000_000, s) for k, (v, s) in _replay(500).items()})
    assert _table_rows(table) == expected
    table.compact(full=True)
    assert _files_per_bucket(table) == {0: 1, 1: 1, 2: 1} and _table_rows(table) == expected


def test_the_buckets_of_a_task_share_its_write_buffer(spark: Any, tmp_path: Path) -> None:
    """A small write-buffer-size: the buckets' buffered rows together pass it, the largest is written as a run,
    and the table still holds the replay's rows."""
    wh, cat = _catalog(tmp_path)
    table = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={
        "bucket": "4", "sink.shuffle-by-bucket": "false", "write-buffer-size": "16 kb", "write-only": "true"})
    n = 30_000
    _rows(spark, n, 2).write.format("managed").option("warehouse", wh).mode("append").save("db.t")
    files = _files_per_bucket(table)
    assert sorted(files) == [0, 1, 2, 3] and all(count > 2 for count in files.values())
    assert _writers(table) == {"parquet-mr"}
    assert _table_rows(table) == _replay(n)


def test_the_write_option_overrides_the_tables(spark: Any, tmp_path: Path) -> None:
    wh, cat = _catalog(tmp_path)
    shuffled = cat.create_table("db.shuffled", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    unshuffled = cat.create_table("db.unshuffled", SCHEMA, primary_key=["id"],
                                  options={"bucket": "2", "sink.shuffle-by-bucket": "false"})
    rows = _rows(spark, 4000, 3)
    rows.write.format("managed").option("warehouse", wh).option("sink.shuffle-by-bucket", "false") \
        .mode("append").save("db.shuffled")
    rows.write.format("managed").option("warehouse", wh).option("sink.shuffle-by-bucket", "true") \
        .mode("append").save("db.unshuffled")
    assert _files_per_bucket(shuffled) == {0: 3, 1: 3} and _writers(shuffled) == {"parquet-mr"}
    assert _files_per_bucket(unshuffled) == {0: 1, 1: 1}
    assert _table_rows(shuffled) == _replay(4000)
    assert set(_table_rows(unshuffled)) == set(_replay(4000))
    with pytest.raises(Exception, match="write option sink.shuffle-by-bucket must be true or false, not 'maybe'"):
        rows.write.format("managed").option("warehouse", wh).option("sink.shuffle-by-bucket", "maybe") \
            .mode("append").save("db.unshuffled")


def test_sql_insert_and_alter_table(spark: Any, spark_warehouse: Path) -> None:
    """SQL: the table property at CREATE TABLE and through ALTER TABLE, an INSERT ... SELECT of several tasks."""
    db = f"unshuffled{os.getpid()}"
    spark.sql(f"CREATE DATABASE managed.{db}")
    try:
        spark.sql(f"CREATE TABLE managed.{db}.t (id BIGINT NOT NULL, v BIGINT, s STRING) TBLPROPERTIES ('primary-key' "
                  "= 'id', 'bucket' = '2', 'sink.shuffle-by-bucket' = 'false', 'write-only' = 'true')")
        _rows(spark, 3000, 3).createOrReplaceTempView("unshuffled_src")
        spark.sql(f"INSERT INTO managed.{db}.t SELECT * FROM unshuffled_src")
        table = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.t")
        assert _files_per_bucket(table) == {0: 3, 1: 3} and _table_rows(table) == _replay(3000)
        assert _writers(table) == {"parquet-mr"}
        spark.sql(f"ALTER TABLE managed.{db}.t SET TBLPROPERTIES ('sink.shuffle-by-bucket' = 'true')")
        spark.sql(f"INSERT INTO managed.{db}.t SELECT * FROM unshuffled_src")
        assert _files_per_bucket(table) == {0: 4, 1: 4}   # one more run per bucket: shuffled
        assert spark.sql(f"SELECT count(*) FROM managed.{db}.t").collect()[0][0] == KEYS
        # a streaming query's write keeps one writer per bucket: one run per bucket for its one micro-batch
        spark.sql(f"CREATE TABLE managed.{db}.st (id BIGINT NOT NULL, v BIGINT, s STRING) TBLPROPERTIES ("
                  "'primary-key' = 'id', 'bucket' = '2', 'sink.shuffle-by-bucket' = 'false', 'write-only' = 'true')")
        source = spark_warehouse.parent / f"{db}-src"
        _rows(spark, 3000, 3).write.parquet(str(source))
        query = (spark.readStream.schema("id BIGINT, v BIGINT, s STRING").parquet(str(source)).writeStream
                 .option("checkpointLocation", str(spark_warehouse.parent / f"{db}-cp")).trigger(availableNow=True)
                 .toTable(f"managed.{db}.st"))
        query.awaitTermination()
        streamed = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.st")
        assert _files_per_bucket(streamed) == {0: 1, 1: 1} and set(_table_rows(streamed)) == set(_replay(3000))
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS managed.{db} CASCADE")


def test_writes_it_does_not_apply_to_are_shuffled_by_bucket(spark: Any, tmp_path: Path) -> None:
    """The option is false, but: the Python writer (`jvm-writer` = false), a string primary key, rows of another
    type than the table's, a changelog: one run per bucket, the rows right."""
    wh, cat = _catalog(tmp_path)
    opts = {"bucket": "2", "sink.shuffle-by-bucket": "false"}
    rows = _rows(spark, 3000, 3)
    cases: dict[str, tuple[pa.Schema, Any, dict[str, str]]] = {
        "python": (SCHEMA, rows, {"jvm-writer": "false"}),
        "strkey": (pa.schema([pa.field("id", pa.string(), False), ("v", pa.int64()), ("s", pa.string())]),
                   rows.selectExpr("cast(id AS string) AS id", "v", "s"), {}),
        "cast": (pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int32()), ("s", pa.string())]),
                 rows.selectExpr("id", "cast(v % 1000 AS bigint) AS v", "s"), {}),   # Python casts it
        "kinds": (SCHEMA, rows.selectExpr("*", "'+I' AS _row_kind"), {}),
    }
    for name, (schema, df, write_opts) in cases.items():
        table = cat.create_table(f"db.{name}", schema, primary_key=["id"], options=opts)
        df.write.format("managed").option("warehouse", wh).options(**write_opts).mode("append").save(f"db.{name}")
        assert _files_per_bucket(table) == {0: 1, 1: 1}, name
        assert _writers(table) == {"parquet-cpp-arrow"}, name   # Python's writer: the JVM's does not apply
        assert table.read().num_rows == KEYS, name


def test_a_failed_unshuffled_write_commits_nothing(spark: Any, tmp_path: Path) -> None:
    """A null primary key in one task's rows: the write fails naming the column, nothing is committed, and once
    the orphans are removed (a task that finished after the failure may leave its files) no data file is left."""
    import datetime as dt

    wh, cat = _catalog(tmp_path)
    table = cat.create_table("db.t", SCHEMA, primary_key=["id"],
                             options={"bucket": "3", "sink.shuffle-by-bucket": "false", "write-buffer-size": "8 kb"})
    rows = spark.range(0, 6000, 1, 2).selectExpr(f"IF(id = 5999, NULL, id * 7919 % {KEYS}) AS id", "id AS v",
                                                 "concat('r', id) AS s")
    with pytest.raises(Exception, match="primary-key column 'id' has nulls"):
        rows.write.format("managed").option("warehouse", wh).mode("append").save("db.t")
    assert table.latest_snapshot_id() is None
    table.remove_orphan_files(older_than=dt.timedelta(0))
    assert list(Path(table.path).glob("bucket-*/data-*")) == []
    assert table.read().num_rows == 0
