"""Schema evolution through Spark: ALTER TABLE ... ADD COLUMNS / ALTER COLUMN ... TYPE in the `managed` catalog,
what SELECT, INSERT and the `managed` data source see afterwards, and the refusals as analysis errors."""
from __future__ import annotations

import itertools
import time
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

import tablestore

pytestmark = pytest.mark.spark

_names = itertools.count()


@pytest.fixture
def db(spark: Any) -> Iterator[str]:
    name = f"evodb{next(_names)}_{int(time.time() * 1000) % 100000}"
    spark.sql(f"CREATE DATABASE managed.{name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS managed.{name} CASCADE")


@pytest.fixture
def python_catalog(spark_warehouse: Path) -> tablestore.Catalog:
    return tablestore.Catalog(str(spark_warehouse))


def rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


def error_of(spark: Any, sql: str) -> str:
    with pytest.raises(AnalysisException) as caught:
        spark.sql(sql).collect()
    return str(caught.value)


def test_add_columns_and_widen_then_select_and_insert(spark: Any, python_catalog: tablestore.Catalog,
                                                      db: str) -> None:
    t = f"managed.{db}.t"
    spark.sql(f"CREATE TABLE {t} (id BIGINT NOT NULL, v INT, amount DECIMAL(10,2), PRIMARY KEY (id) NOT ENFORCED) "
              f"TBLPROPERTIES ('bucket' = '2')")
    spark.sql(f"INSERT INTO {t} VALUES (1, 10, 1.50), (2, 20, 2.50)")
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (c INT, d STRING COMMENT 'added')")
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN v TYPE BIGINT")
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN amount TYPE DECIMAL(12,2)")
    schema = python_catalog.get_table(f"{db}.t").schema
    assert schema.names == ["id", "v", "amount", "c", "d"]
    assert schema.field("v").type == pa.int64() and schema.field("amount").type == pa.decimal128(12, 2)
    assert schema.field("d").metadata == {b"comment": b"added"}
    assert rows(spark, f"SELECT * FROM {t}") == sorted([(1, 10, Decimal("1.50"), None, None),
                                                        (2, 20, Decimal("2.50"), None, None)], key=repr)
    described = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE {t}").collect()}
    assert described["v"] == "bigint" and described["c"] == "int" and described["d"] == "string"
    spark.sql(f"INSERT INTO {t} VALUES (2, 5000000000, 9.99, 7, 'x'), (3, 3, 3.00, 8, 'y')")
    expected = [(1, 10, Decimal("1.50"), None, None), (2, 5000000000, Decimal("9.99"), 7, "x"),
                (3, 3, Decimal("3.00"), 8, "y")]
    assert rows(spark, f"SELECT * FROM {t}") == sorted(expected, key=repr)
    assert rows(spark, f"SELECT id FROM {t} WHERE c IS NULL") == [(1,)]
    assert rows(spark, f"SELECT id FROM {t} WHERE v > 4000000000") == [(2,)]
    # the data source reads and writes the evolved table too
    df = spark.read.format("managed").load(f"{db}.t")
    assert df.columns == ["id", "v", "amount", "c", "d"]
    assert sorted(tuple(r) for r in df.collect()) == expected   # ids differ: sorted by id
    new = spark.createDataFrame([(4, 4, Decimal("4.00"), 9, "z")], df.schema)
    new.write.format("managed").mode("append").save(f"{db}.t")
    assert rows(spark, f"SELECT id, d FROM {t} WHERE id = 4") == [(4, "z")]
    python_catalog.get_table(f"{db}.t").compact(full=True)   # old files rewritten under the new schema
    assert rows(spark, f"SELECT * FROM {t} WHERE id < 4") == sorted(expected, key=repr)
    # the Python API sees what SQL wrote
    assert python_catalog.get_table(f"{db}.t").read().sort_by("id").column("c").to_pylist() == [None, 7, 8, 9]


def test_table_without_primary_key_and_python_side_alter(spark: Any, python_catalog: tablestore.Catalog,
                                                         db: str) -> None:
    t = f"managed.{db}.log"
    spark.sql(f"CREATE TABLE {t} (k STRING, n INT) TBLPROPERTIES ('bucket' = '3')")
    spark.sql(f"INSERT INTO {t} VALUES ('a', 1), ('a', 1), ('b', 2)")
    python_catalog.get_table(f"{db}.log").add_column("extra", pa.float32())   # seen by SQL at the next statement
    spark.sql(f"INSERT INTO {t} VALUES ('a', 1, 0.5), ('c', 3, NULL)")
    assert rows(spark, f"SELECT * FROM {t}") == sorted([("a", 1, None), ("a", 1, None), ("a", 1, 0.5),
                                                        ("b", 2, None), ("c", 3, None)], key=repr)
    spark.sql(f"ALTER TABLE {t} ALTER COLUMN extra TYPE DOUBLE")   # an added column of such a table may widen
    assert rows(spark, f"SELECT count(*) FROM {t} WHERE extra IS NULL") == [(4,)]


def test_refused_changes_are_analysis_errors(spark: Any, db: str) -> None:
    t = f"managed.{db}.r"
    spark.sql(f"CREATE TABLE {t} (id INT NOT NULL, dt STRING NOT NULL, v INT, PRIMARY KEY (id, dt) NOT ENFORCED) "
              f"PARTITIONED BY (dt)")
    message = error_of(spark, f"ALTER TABLE {t} ALTER COLUMN id TYPE BIGINT")
    assert "cannot change column 'id' from int32 to int64" in message and "primary-key" in message
    assert "bucket hash" in message and "Traceback" not in message and "at tablestore." not in message
    assert "FIELD_ALREADY_EXISTS" in error_of(spark, f"ALTER TABLE {t} ADD COLUMNS (v BIGINT)")   # Spark's own check
    message = error_of(spark, f"ALTER TABLE {t} ADD COLUMNS (_row_kind STRING)")
    assert "reserved" in message
    message = error_of(spark, f"ALTER TABLE {t} ADD COLUMN w INT FIRST")
    assert "at the end only" in message
    message = error_of(spark, f"ALTER TABLE {t} ADD COLUMNS (w INT NOT NULL)")
    assert "must be nullable" in message
    spark.sql(f"INSERT INTO {t} VALUES (1, 'a', 1)")   # nothing was changed by the refusals
    assert rows(spark, f"SELECT * FROM {t}") == [(1, "a", 1)]


def test_jvm_writer_writes_the_evolved_schema_or_steps_aside(spark: Any, tmp_path: Path) -> None:
    """A table the JVM writer writes: after add_column, a write with the new column is the JVM's (files of the new
    schema); one without it is Python's (nulls in the column); every file reads back."""
    import pyarrow.parquet as pq
    from pyspark.sql.types import IntegerType, LongType, StringType, StructField, StructType

    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    t = cat.create_table("db.j", pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int32())]),
                         primary_key=["id"], options={"bucket": "2", "write-only": "true"})
    old = StructType([StructField("id", LongType(), False), StructField("v", IntegerType())])
    new = StructType([*old.fields, StructField("c", StringType())])

    def write(rows: list[tuple[Any, ...]], schema: StructType) -> list[tuple[str, int]]:
        spark.createDataFrame(rows, schema).write.format("managed").option("warehouse", str(wh)) \
            .mode("append").save("db.j")
        store = cat.get_table("db.j")._store
        added = store.snapshots.latest().id
        files = [e for e in store.live_entries(store.snapshots.latest()).values()]
        paths = {e.file.file_name: store.data_file_path(e.partition, e.bucket, e.file.file_name) for e in files}
        assert added is not None
        return sorted((pq.ParquetFile(paths[e.file.file_name]).metadata.created_by.split(" ")[0], e.file.schema_id)
                      for e in files)

    first = write([(1, 1), (2, 2)], old)
    assert {c for c, _ in first} == {"parquet-mr"}   # the JVM writer applies to this table
    t.add_column("c", pa.string())
    second = write([(2, 20, "x"), (3, 30, "y")], new)
    assert ("parquet-mr", 1) in second and ("parquet-mr", 0) in second
    third = write([(4, 40)], old)   # the rows lack column c: the JVM writer steps aside
    assert len(third) == len(second) + 1 and ("parquet-cpp-arrow", 1) in third
    assert sorted(tuple(r.values()) for r in t.read().to_pylist()) == [(1, 1, None), (2, 20, "x"), (3, 30, "y"),
                                                                      (4, 40, None)]


def test_a_running_stream_of_changes_keeps_its_columns_after_a_column_is_added(spark: Any, tmp_path: Path) -> None:
    """Spark fixes a stream's schema at its start: a reader of a table's changes started before `add_column` and a
    widening keeps delivering the rows in its columns and types; a restarted reader sees the new column."""
    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    t = cat.create_table("db.s", pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int32())]),
                         primary_key=["id"])
    t.write(pa.table({"id": [1, 2], "v": pa.array([1, 2], pa.int32())}))
    got: list[tuple[Any, ...]] = []
    stream = spark.readStream.format("managed").option("warehouse", str(wh)).load("db.s")
    query = (stream.writeStream.foreachBatch(lambda df, _: got.extend(tuple(r) for r in df.collect()))
             .option("checkpointLocation", str(tmp_path / "ck")).trigger(processingTime="200 milliseconds").start())
    try:
        _until(lambda: len(got) >= 2, query)
        t.add_column("c", pa.string())
        t.alter_column_type("v", pa.int64())
        t.write(pa.table({"id": [3], "v": [30], "c": ["x"]}))
        _until(lambda: len(got) >= 3, query)
    finally:
        query.stop()
    assert sorted(got) == [("+I", 1, 1), ("+I", 2, 2), ("+I", 3, 30)]
    restarted = spark.readStream.format("managed").option("warehouse", str(wh)).load("db.s")
    assert restarted.columns == ["_row_kind", "id", "v", "c"]


def _until(done: Any, query: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, "the stream delivered too little in time"
        time.sleep(0.2)
