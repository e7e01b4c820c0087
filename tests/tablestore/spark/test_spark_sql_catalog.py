"""Spark SQL through the `managed` catalog (tablestore.spark.jvm.catalog.ManagedCatalog), from PySpark: the session
of conftest (`tablestore.spark.session` configures the catalog), one database per test. The spark-sql shell has
its own test (test_spark_sql_shell.py)."""
from __future__ import annotations

import itertools
import os
import signal
import time
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyspark
import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.functions import col

import catalog
import tablestore
from catalog import CatalogError

pytestmark = pytest.mark.spark

_names = itertools.count()
PYSPARK_4_1 = tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 2)
SESSION_BUCKET = "spark.sql.catalog.managed.table-storage.bucket"


@pytest.fixture
def db(spark: Any) -> Iterator[str]:
    name = f"sqldb{next(_names)}_{int(time.time() * 1000) % 100000}"
    spark.sql(f"CREATE DATABASE managed.{name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS managed.{name} CASCADE")


@pytest.fixture
def python_catalog(spark_warehouse: Path) -> tablestore.Catalog:
    return tablestore.Catalog(str(spark_warehouse))


def rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def error_of(spark: Any, sql: str) -> str:
    with pytest.raises(AnalysisException) as caught:
        spark.sql(sql).collect()
    return str(caught.value)


ORDERS = """CREATE TABLE IF NOT EXISTS managed.{db}.orders (
  id BIGINT NOT NULL, dt STRING NOT NULL, amount DECIMAL(10,2), note STRING COMMENT 'free text',
  PRIMARY KEY (id, dt) NOT ENFORCED)
PARTITIONED BY (dt) COMMENT 'orders' TBLPROPERTIES ('log.consistency' = 'eventual')"""


def test_create_insert_select_describe(spark: Any, python_catalog: tablestore.Catalog, db: str) -> None:
    spark.sql(ORDERS.format(db=db))
    spark.sql(ORDERS.format(db=db))   # IF NOT EXISTS
    assert rows(spark, f"SHOW TABLES IN managed.{db}") == [(db, "orders", False)]
    assert "TABLE_OR_VIEW_ALREADY_EXISTS" in error_of(spark, ORDERS.format(db=db).replace(" IF NOT EXISTS", ""))
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (1, 'a', 1.5, 'x'), (2, 'b', 2.5, 'y'), (11, 'a', 3.5, 'z')")
    spark.sql(f"INSERT INTO managed.{db}.orders SELECT 1L, 'a', 9.0, 'upsert'")   # a primary-key table upserts
    assert rows(spark, f"SELECT * FROM managed.{db}.orders ORDER BY id") == [
        (1, "a", Decimal("9.00"), "upsert"), (2, "b", Decimal("2.50"), "y"), (11, "a", Decimal("3.50"), "z")]
    query = spark.sql(f"SELECT id FROM managed.{db}.orders WHERE dt = 'a' AND id > 10")
    assert [tuple(r) for r in query.collect()] == [(11,)]
    plan = query._jdf.queryExecution().executedPlan().toString()
    nodes = [line.lstrip("+-*() 0123456789:") for line in plan.splitlines()]
    assert any(n.startswith("BatchScan") for n in nodes)
    # the partition filter is exact (only dt=a's files are planned); the key filter goes to the readers (row groups
    # skipped by it) and stays with Spark, which filters the rows of the raw splits
    spark_filter = " ".join(n for n in nodes if n.startswith("Filter"))
    assert "id#" in spark_filter and "dt#" not in spark_filter, plan

    described = {r[0]: r[1] for r in rows(spark, f"DESCRIBE TABLE EXTENDED managed.{db}.orders")}
    assert described["Comment"] == "orders" and described["Provider"] == "managed"
    assert "log.consistency=eventual" in described["Table Properties"]
    assert described["orders_pk"].startswith("PRIMARY KEY (id, dt) NOT ENFORCED")   # 4.2+: NORELY too
    assert rows(spark, f"DESCRIBE TABLE managed.{db}.orders")[3] == ("note", "string", "free text")
    ddl = rows(spark, f"SHOW CREATE TABLE managed.{db}.orders")[0][0]
    for part in ("PRIMARY KEY (id, dt) NOT ENFORCED", "PARTITIONED BY (dt)", "COMMENT 'orders'",
                 "COMMENT 'free text'", "'log.consistency' = 'eventual'", "id BIGINT NOT NULL"):
        assert part in ddl
    spark.sql(ddl.replace(f"managed.{db}.orders", f"managed.{db}.again"))   # SHOW CREATE TABLE runs as it is
    again = python_catalog.get_table(f"{db}.again")
    assert (again.schema, again.primary_key, again.partition_by) == (
        python_catalog.get_table(f"{db}.orders").schema, ["id", "dt"], ["dt"])

    table = python_catalog.get_table(f"{db}.orders")   # the Python API sees the table SQL created
    assert (table.primary_key, table.partition_by) == (["id", "dt"], ["dt"])
    assert table.schema.field("note").metadata == {b"comment": b"free text"}
    assert not table.schema.field("id").nullable and table.schema.field("amount").nullable
    assert table.options["log.consistency"] == "eventual"
    assert sorted(table.read().column("id").to_pylist()) == [1, 2, 11]


def test_session_defaults_set_in_sql_reach_create_table(spark: Any, python_catalog: tablestore.Catalog,
                                                        db: str) -> None:
    spark.sql(f"SET {SESSION_BUCKET} = 4;")   # the form: the key unquoted although it has a '-'
    assert spark.conf.get(SESSION_BUCKET) == "4"
    try:
        spark.sql(f"CREATE TABLE managed.{db}.t (id BIGINT NOT NULL, v STRING) TBLPROPERTIES ('primary-key' = 'id')")
    finally:
        spark.conf.unset(SESSION_BUCKET)
    spark.sql(f"CREATE TABLE managed.{db}.later (id BIGINT)")
    assert python_catalog.get_table(f"{db}.t").options["bucket"] == "4"
    assert python_catalog.get_table(f"{db}.later").options.get("bucket", "1") == "1"


def test_property_form_primary_key_and_ctas(spark: Any, python_catalog: tablestore.Catalog, db: str) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.t2 (id BIGINT NOT NULL, v STRING) TBLPROPERTIES ('primary-key' = 'id')")
    spark.sql(f"INSERT INTO managed.{db}.t2 VALUES (1, 'a'), (2, 'b')")
    spark.sql(f"INSERT INTO managed.{db}.t2 VALUES (2, 'B')")
    assert python_catalog.get_table(f"{db}.t2").primary_key == ["id"]
    assert "PRIMARY KEY (id) NOT ENFORCED" in rows(spark, f"SHOW CREATE TABLE managed.{db}.t2")[0][0]

    spark.sql(f"CREATE TABLE managed.{db}.t3 COMMENT 'copy' AS SELECT id, upper(v) AS v FROM managed.{db}.t2")
    assert rows(spark, f"SELECT * FROM managed.{db}.t3 ORDER BY id") == [(1, "A"), (2, "B")]
    assert catalog.Catalog(python_catalog.warehouse).get_table(f"{db}.t3").schema.comment == "copy"


def test_invalid_ddl_gives_the_python_catalogs_message(spark: Any, python_catalog: tablestore.Catalog,
                                                       db: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False)])
    cases = [
        (f"CREATE TABLE managed.{db}.bad (id BIGINT NOT NULL, dt STRING NOT NULL, PRIMARY KEY (id) NOT ENFORCED) "
         "PARTITIONED BY (dt)", dict(primary_key=["id"], partition_by=["dt"])),
        (f"CREATE TABLE managed.{db}.bad (id BIGINT NOT NULL, dt STRING NOT NULL) TBLPROPERTIES ('bukket' = '2')",
         dict(options={"bukket": "2"})),
        (f"CREATE TABLE managed.{db}.bad (id BIGINT NOT NULL, dt STRING NOT NULL) TBLPROPERTIES ('bucket' = '0')",
         dict(options={"bucket": "0"})),
    ]
    for sql, kwargs in cases:
        with pytest.raises(CatalogError) as python_error:
            python_catalog.create_table(f"{db}.bad", schema, **kwargs)   # type: ignore[arg-type]
        message = error_of(spark, sql)
        assert str(python_error.value) in message
    assert "must be part of the primary key ['id']" in error_of(spark, cases[0][0])
    assert "valid options: bucket, change-tracking" in error_of(spark, cases[1][0])
    assert not python_catalog.table_exists(f"{db}.bad")

    enforced = error_of(spark, f"CREATE TABLE managed.{db}.bad (id BIGINT NOT NULL, PRIMARY KEY (id) ENFORCED)")
    assert "UNSUPPORTED_CONSTRAINT_CHARACTERISTIC" in enforced and "ENFORCED" in enforced
    assert "TABLE_OR_VIEW_NOT_FOUND" in error_of(spark, f"SELECT * FROM managed.{db}.missing")
    assert "USING parquet is not supported" in error_of(
        spark, f"CREATE TABLE managed.{db}.bad (id BIGINT) USING parquet")


def test_insert_overwrite_partition_and_dynamic(spark: Any, db: str) -> None:
    spark.sql(ORDERS.format(db=db))
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (1, 'a', 1, 'x'), (2, 'b', 2, 'y'), (3, 'a', 3, 'z')")
    spark.sql(f"INSERT OVERWRITE managed.{db}.orders PARTITION (dt = 'a') SELECT 5, 9.9, 'new'")
    assert rows(spark, f"SELECT id, dt FROM managed.{db}.orders ORDER BY id") == [(2, "b"), (5, "a")]
    spark.sql("SET spark.sql.sources.partitionOverwriteMode = dynamic")
    try:
        spark.sql(f"INSERT OVERWRITE managed.{db}.orders VALUES (7, 'c', 1, 'dyn'), (8, 'b', 1, 'dyn')")
    finally:
        spark.conf.unset("spark.sql.sources.partitionOverwriteMode")
    assert rows(spark, f"SELECT id, dt FROM managed.{db}.orders ORDER BY id") == [(5, "a"), (7, "c"), (8, "b")]
    # writeTo().overwrite(condition): the partitions the condition selects (here none of the new rows' partition)
    spark.createDataFrame([(6, "d", Decimal("1.00"), "cond")], "id BIGINT, dt STRING, amount DECIMAL(10,2), "
                          "note STRING").writeTo(f"managed.{db}.orders").overwrite(col("dt").isin("c", "b"))
    assert rows(spark, f"SELECT id, dt FROM managed.{db}.orders ORDER BY id") == [(5, "a"), (6, "d")]
    with pytest.raises(Exception, match="not partition columns"):
        spark.createDataFrame([], "id BIGINT, dt STRING, amount DECIMAL(10,2), note STRING").writeTo(
            f"managed.{db}.orders").overwrite(col("id") > 5)
    spark.sql(f"INSERT OVERWRITE managed.{db}.orders SELECT 9, 'z', 0, 'all'")   # static: the whole table
    assert rows(spark, f"SELECT id, dt FROM managed.{db}.orders") == [(9, "z")]


def test_time_travel_version_and_timestamp(spark: Any, python_catalog: tablestore.Catalog, db: str) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.t (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED)")
    spark.sql(f"INSERT INTO managed.{db}.t VALUES (1)")
    first = python_catalog.get_table(f"{db}.t").snapshots()[-1]
    time.sleep(0.05)
    spark.sql(f"INSERT INTO managed.{db}.t VALUES (2)")
    assert rows(spark, f"SELECT id FROM managed.{db}.t VERSION AS OF {first.id} ORDER BY id") == [(1,)]
    at = first.time.strftime("%Y-%m-%d %H:%M:%S.%f")
    assert rows(spark, f"SELECT id FROM managed.{db}.t TIMESTAMP AS OF '{at}' ORDER BY id") == [(1,)]
    assert rows(spark, f"SELECT id FROM managed.{db}.t ORDER BY id") == [(1,), (2,)]
    assert "snapshot 99" in error_of(spark, f"SELECT id FROM managed.{db}.t VERSION AS OF 99").lower()
    assert "PYTHON_DATA_SOURCE_ERROR" not in error_of(spark, f"SELECT id FROM managed.{db}.t TIMESTAMP AS OF "
                                                             "'2000-01-01'")


def test_alter_table_options_one_source_of_truth(spark: Any, python_catalog: tablestore.Catalog, db: str) -> None:
    spark.sql(ORDERS.format(db=db))
    spark.sql(f"ALTER TABLE managed.{db}.orders SET TBLPROPERTIES ('snapshot.num-retained.max' = '20')")
    assert python_catalog.get_table(f"{db}.orders").options["snapshot.num-retained.max"] == "20"
    python_catalog.alter_table_options(f"{db}.orders", {"write-only": "true"}, ["snapshot.num-retained.max"])
    properties = dict(rows(spark, f"SHOW TBLPROPERTIES managed.{db}.orders"))
    assert properties["write-only"] == "true" and "snapshot.num-retained.max" not in properties
    message = error_of(spark, f"ALTER TABLE managed.{db}.orders SET TBLPROPERTIES ('bucket' = '8')")
    assert "option 'bucket' is fixed when the table is created" in message and "snapshot.num-retained.max" in message
    assert "unknown table option 'nope'" in error_of(
        spark, f"ALTER TABLE managed.{db}.orders SET TBLPROPERTIES ('nope' = '1')")
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (1, 'a', 1, 'x')")   # the altered table still writes and reads
    assert rows(spark, f"SELECT id FROM managed.{db}.orders") == [(1,)]


def test_drop_by_either_side_removes_for_both(spark: Any, python_catalog: tablestore.Catalog, db: str) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])
    python_catalog.create_table(f"{db}.py", schema, primary_key=["id"]).write(pa.table({"id": [1], "v": ["p"]},
                                                                                        schema=schema))
    assert rows(spark, f"SELECT * FROM managed.{db}.py") == [(1, "p")]   # created in Python, seen in SQL
    spark.sql(f"DROP TABLE managed.{db}.py")
    assert not python_catalog.table_exists(f"{db}.py")
    assert not (Path(python_catalog.warehouse) / f"{db}.db" / "py").exists()

    spark.sql(f"CREATE TABLE managed.{db}.sq (id BIGINT)")
    python_catalog.drop_table(f"{db}.sq")
    assert rows(spark, f"SHOW TABLES IN managed.{db}") == []
    assert "TABLE_OR_VIEW_NOT_FOUND" in error_of(spark, f"SELECT * FROM managed.{db}.sq")
    spark.sql(f"DROP TABLE IF EXISTS managed.{db}.sq")


def test_alter_table_rename_to(spark: Any, python_catalog: tablestore.Catalog, db: str) -> None:
    """ALTER TABLE ... RENAME TO, as in Spark and Paimon (issue 52): a bare new name stays in the table's
    database; the data and its history move; the Python API sees it."""
    spark.sql(f"CREATE TABLE managed.{db}.a (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED)")
    spark.sql(f"INSERT INTO managed.{db}.a VALUES (1, 'x'), (2, 'y')")
    spark.sql(f"ALTER TABLE managed.{db}.a RENAME TO b")
    assert rows(spark, f"SHOW TABLES IN managed.{db}") == [(db, "b", False)]
    assert rows(spark, f"SELECT id, v FROM managed.{db}.b ORDER BY id") == [(1, "x"), (2, "y")]
    spark.sql(f"ALTER TABLE managed.{db}.b RENAME TO {db}.c")
    spark.sql(f"INSERT INTO managed.{db}.c VALUES (3, 'z')")
    assert python_catalog.get_table(f"{db}.c").read().num_rows == 3 and not python_catalog.table_exists(f"{db}.b")
    spark.sql(f"CREATE TABLE managed.{db}.d (id BIGINT)")
    assert "already exists" in error_of(spark, f"ALTER TABLE managed.{db}.c RENAME TO d")


def test_alter_table_rename_and_drop_column(spark: Any, python_catalog: tablestore.Catalog, db: str) -> None:
    """ALTER TABLE ... RENAME COLUMN / DROP COLUMN(S) (issue 52): rows written before read their values under the
    new name, a dropped column's data never comes back under a re-added name; SQL and the Python API agree."""
    t = f"managed.{db}.cols"
    spark.sql(f"CREATE TABLE {t} (id BIGINT NOT NULL, note STRING, channel STRING, x INT, "
              f"PRIMARY KEY (id) NOT ENFORCED)")
    spark.sql(f"INSERT INTO {t} VALUES (1, 'n1', 'web', 10), (2, 'n2', 'app', 20)")
    spark.sql(f"ALTER TABLE {t} RENAME COLUMN note TO remark")
    spark.sql(f"ALTER TABLE {t} DROP COLUMN channel")
    spark.sql(f"INSERT INTO {t} VALUES (3, 'n3', 30)")
    assert rows(spark, f"SELECT * FROM {t} ORDER BY id") == [(1, "n1", 10), (2, "n2", 20), (3, "n3", 30)]
    assert rows(spark, f"SELECT id FROM {t} WHERE remark = 'n2'") == [(2,)]
    spark.sql(f"ALTER TABLE {t} ADD COLUMNS (channel STRING)")
    assert rows(spark, f"SELECT id, channel FROM {t} ORDER BY id") == [(1, None), (2, None), (3, None)]
    assert rows(spark, f"SELECT id FROM {t} WHERE channel = 'web'") == []
    spark.sql(f"ALTER TABLE {t} DROP COLUMNS (x, channel)")
    table = python_catalog.get_table(f"{db}.cols")
    assert table.schema.names == ["id", "remark"]
    assert table.read().sort_by("id").to_pylist() == [{"id": 1, "remark": "n1"}, {"id": 2, "remark": "n2"},
                                                      {"id": 3, "remark": "n3"}]
    spark.sql(f"ALTER TABLE {t} DROP COLUMN IF EXISTS nope")
    message = error_of(spark, f"ALTER TABLE {t} DROP COLUMN id")
    assert "cannot drop column 'id'" in message and "primary-key" in message
    message = error_of(spark, f"ALTER TABLE {t} RENAME COLUMN id TO key")
    assert "cannot rename column 'id'" in message and "primary-key" in message
    assert python_catalog.get_table(f"{db}.cols").schema.names == ["id", "remark"]
    # files whose only change is a dropped column are still read as they are (by Spark's Parquet reader)
    spark.sql(f"CREATE TABLE managed.{db}.d (id BIGINT NOT NULL, a STRING, b STRING, PRIMARY KEY (id) NOT ENFORCED)")
    spark.sql(f"INSERT INTO managed.{db}.d VALUES (1, 'a1', 'b1'), (2, 'a2', 'b2')")
    spark.sql(f"ALTER TABLE managed.{db}.d DROP COLUMN a")
    assert rows(spark, f"SELECT * FROM managed.{db}.d ORDER BY id") == [(1, "b1"), (2, "b2")]
    assert rows(spark, f"SELECT id FROM managed.{db}.d WHERE b = 'b2'") == [(2,)]


@pytest.mark.kafka
def test_drop_table_removes_its_topic(spark: Any, python_catalog: tablestore.Catalog, db: str,
                                      kafka_bootstrap: str) -> None:
    key = "spark.sql.catalog.managed.table-storage.log.properties.bootstrap.servers"
    spark.sql(f"SET `{key}` = `{kafka_bootstrap}`")
    try:
        spark.sql(f"CREATE TABLE managed.{db}.logged (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED)")
        handle = catalog.Catalog(python_catalog.warehouse).get_table(f"{db}.logged")
        assert handle.log is not None and handle.log.admin.partitions(handle.log.topic) == 1
        spark.sql(f"DROP TABLE managed.{db}.logged")
        assert handle.log.admin.partitions(handle.log.topic) is None
    finally:
        spark.conf.unset(key)


def test_streaming_read_and_write_through_the_catalog(spark: Any, db: str, tmp_path: Path) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.src (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED)")
    spark.sql(f"CREATE TABLE managed.{db}.dst (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED)")
    spark.sql(f"INSERT INTO managed.{db}.src VALUES (1, 'a'), (2, 'b')")
    if PYSPARK_4_1:   # no column pruning in 4.1's micro-batch planning: the column is not offered (docs/spark_sql.md)
        assert "_row_kind" in error_of(spark, f"SELECT _row_kind, id FROM managed.{db}.src")
    else:
        assert rows(spark, f"SELECT _row_kind, id FROM managed.{db}.src ORDER BY id") == [("+I", 1), ("+I", 2)]

    def run() -> list[tuple[Any, ...]]:
        seen: list[tuple[Any, ...]] = []
        changes = spark.readStream.table(f"managed.{db}.src").select("_row_kind", "*")
        query = changes.writeStream.foreachBatch(lambda df, _: seen.extend(tuple(r) for r in df.collect())) \
            .trigger(availableNow=True).option("checkpointLocation", str(tmp_path / "changes")).start()
        query.awaitTermination(120)
        return sorted(seen)

    if PYSPARK_4_1:
        spark.sql(f"INSERT INTO managed.{db}.src VALUES (1, 'a2')")
    else:
        assert run() == [("+I", 1, "a"), ("+I", 2, "b")]
        spark.sql(f"INSERT INTO managed.{db}.src VALUES (1, 'a2')")
        assert run() == [("+U", 1, "a2"), ("-U", 1, "a")]   # from the checkpoint: the new changes only

    def upserts() -> list[tuple[Any, ...]]:   # without _row_kind: inserts and updates; a -U or -D row never shows
        seen: list[tuple[Any, ...]] = []
        query = spark.readStream.table(f"managed.{db}.src").writeStream.trigger(availableNow=True) \
            .foreachBatch(lambda df, _: seen.extend(tuple(r) for r in df.collect())) \
            .option("checkpointLocation", str(tmp_path / "upserts")).start()
        query.awaitTermination(120)
        return sorted(seen)

    assert upserts() == [(1, "a2"), (2, "b")]   # the snapshot
    spark.sql(f"INSERT INTO managed.{db}.src VALUES (1, 'a3'), (3, 'c')")
    spark.sql(f"DELETE FROM managed.{db}.src WHERE id = 3")
    assert upserts() == [(1, "a3"), (3, "c")]   # -U (1, 'a2') and -D (3, 'c') left out
    spark.sql(f"INSERT INTO managed.{db}.src VALUES (3, 'c')")

    data = spark.readStream.table(f"managed.{db}.src")   # without _row_kind: the upserts
    query = data.writeStream.option("checkpointLocation", str(tmp_path / "copy")).trigger(availableNow=True) \
        .toTable(f"managed.{db}.dst")
    query.awaitTermination(120)
    assert rows(spark, f"SELECT id, v FROM managed.{db}.dst ORDER BY id") == [(1, "a3"), (2, "b"), (3, "c")]

    counts = spark.readStream.table(f"managed.{db}.src").groupBy("id").count()
    with pytest.raises(Exception, match="a streaming write appends"):
        counts.writeStream.outputMode("complete").option("checkpointLocation", str(tmp_path / "c")) \
            .toTable(f"managed.{db}.dst").awaitTermination(60)


def test_writes_are_clustered_by_partition_and_bucket(spark: Any, db: str) -> None:
    spark.sql(ORDERS.format(db=db).replace("'eventual')", "'eventual', 'bucket' = '4')"))
    plan = "\n".join(r[0] for r in spark.sql(
        f"EXPLAIN INSERT INTO managed.{db}.orders SELECT id, 'a', 1, 'x' FROM range(10)").collect())
    exchange = next(line for line in plan.splitlines() if "Exchange hashpartitioning(" in line)
    clustering = exchange.split("hashpartitioning(")[1]
    assert clustering.startswith("dt#") and "BucketFunction$Bound" in clustering.split(", id#")[0], plan
    assert "REPARTITION_BY_COL" in plan and "Sort [" not in plan, plan   # a repartition, no local sort


@pytest.fixture
def many_tasks(spark: Any) -> Iterator[None]:
    """Shuffles of 8 tasks that AQE does not merge: a bucket clustered by anything finer than the bucket (e.g.
    its keys) would be written by several tasks."""
    confs = {"spark.sql.shuffle.partitions": "8", "spark.sql.adaptive.coalescePartitions.enabled": "false"}
    before = {k: spark.conf.get(k, None) for k in confs}
    for k, v in confs.items():
        spark.conf.set(k, v)
    yield
    for k, v in before.items():
        spark.conf.unset(k) if v is None else spark.conf.set(k, v)


@pytest.mark.parametrize("primary_key", [True, False])
def test_insert_leaves_one_sorted_run_per_partition_and_bucket(spark: Any, python_catalog: tablestore.Catalog,
                                                                db: str, many_tasks: None, primary_key: bool) -> None:
    pk = ", PRIMARY KEY (id, dt) NOT ENFORCED" if primary_key else ""
    spark.sql(f"CREATE TABLE managed.{db}.t (id BIGINT NOT NULL, dt STRING NOT NULL, v STRING{pk}) "
              "PARTITIONED BY (dt) TBLPROPERTIES ('bucket' = '4', 'write-only' = 'true')")   # every run stays
    source = spark.range(2000).selectExpr("id", "IF(id % 3 = 0, 'x', 'y') AS dt", "CAST(id * 7 AS STRING) AS v")
    source.repartition(8).createOrReplaceTempView(f"src_{db}")
    spark.sql(f"INSERT INTO managed.{db}.t SELECT * FROM src_{db}")
    spark.sql(f"INSERT INTO managed.{db}.t SELECT id, dt, 'again' FROM src_{db} WHERE id < 500")

    table = python_catalog.get_table(f"{db}.t")
    files = table.files()
    runs = sorted((f["partition"]["dt"], f["bucket"], f["min_sequence_number"]) for f in files)  # type: ignore
    per_bucket = {(dt, b): 0 for dt, b, _ in runs}
    for dt, b, _ in runs:
        per_bucket[(dt, b)] += 1
    assert sorted(per_bucket) == [(dt, b) for dt in "xy" for b in range(4)]   # 8 (partition, bucket)s
    # one new file (one sorted run) per (partition, bucket) and INSERT
    assert set(per_bucket.values()) == {2}, runs
    expected = [(i, "x" if i % 3 == 0 else "y", str(i * 7)) for i in range(2000)]
    if primary_key:
        expected = [(i, dt, "again" if i < 500 else v) for i, dt, v in expected]
    else:
        expected += [(i, dt, "again") for i, dt, _ in expected[:500]]
    assert sorted(rows(spark, f"SELECT id, dt, v FROM managed.{db}.t")) == sorted(expected)


@pytest.mark.parametrize("path", ["sql", "dataframe"])
@pytest.mark.parametrize("key", ["id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED",
                                 "id BIGINT NOT NULL, v STRING NOT NULL, PRIMARY KEY (v, id) NOT ENFORCED",
                                 "id BIGINT NOT NULL, v STRING"])
def test_a_task_per_bucket_writes_every_row_into_its_own_bucket(spark: Any, spark_warehouse: Path, db: str,
                                                                 many_tasks: None, key: str, path: str) -> None:
    """An unpartitioned table whose buckets each get a write task: the Python writer takes the task's bucket from
    the clustering instead of hashing every row (write.TASK_BUCKET_OPTION); every row must still be in the bucket
    the file store's bucket function gives it, with or without AQE."""
    from filestore import bucket_of

    for n, aqe in enumerate(["true", "false"]):
        before = spark.conf.get("spark.sql.adaptive.enabled")
        spark.conf.set("spark.sql.adaptive.enabled", aqe)
        try:
            spark.sql(f"CREATE TABLE managed.{db}.b{n} ({key}) TBLPROPERTIES ('bucket' = '4')")
            spark.range(5000).selectExpr("id", "CONCAT('k', CAST(id % 997 AS STRING)) AS v").repartition(3) \
                .createOrReplaceTempView(f"src_{db}")
            if path == "sql":
                spark.sql(f"INSERT INTO managed.{db}.b{n} SELECT * FROM src_{db}")
            else:   # df.write.format("managed") clusters the same way (BucketClustering)
                spark.table(f"src_{db}").write.format("managed").mode("append") \
                    .option("warehouse", str(spark_warehouse)).save(f"{db}.b{n}")
        finally:
            spark.conf.set("spark.sql.adaptive.enabled", before)
        handle = catalog.Catalog(str(spark_warehouse)).get_table(f"{db}.b{n}")
        store, keys = handle.store, list(handle.schema.key_columns)
        splits = store.new_scan().plan(store.snapshots.latest(), None)
        assert sorted(s.bucket for s in splits) == [0, 1, 2, 3]
        total = 0
        for split in splits:
            data = store.new_read(None, None).read(split)
            assert set(bucket_of(data, keys, 4).tolist()) == {split.bucket}
            total += data.num_rows
        assert total == 5000


def test_a_task_given_rows_of_another_bucket_fails_rather_than_misplacing_them(
        spark: Any, spark_warehouse: Path, db: str) -> None:
    """The writer checks a sample of each chunk against the bucket function when it trusts the clustering."""
    from filestore import bucket_of
    from tablestore.spark.types import spark_schema
    from tablestore.spark.write import TASK_BUCKET_OPTION, ManagedWriter, SparkWriteError

    spark.sql(f"CREATE TABLE managed.{db}.w (id BIGINT NOT NULL, PRIMARY KEY (id) NOT ENFORCED) "
              "TBLPROPERTIES ('bucket' = '2')")
    handle = catalog.Catalog(str(spark_warehouse)).get_table(f"{db}.w")
    ids = pa.table({"id": pa.array(range(100), pa.int64())})
    buckets = bucket_of(ids, ["id"], 2)
    options = {"path": f"{db}.w", "warehouse": str(spark_warehouse), TASK_BUCKET_OPTION: "partition"}
    writer = ManagedWriter(options, spark_schema(handle.schema.arrow_schema), False)
    mine = ids.filter(pa.array(buckets == 0))   # outside Spark the task is 0
    assert sum(len(m.added) for m in writer.write(iter(mine.to_batches())).messages) == 1
    with pytest.raises(SparkWriteError, match="rows of bucket 1"):
        writer.write(iter(ids.to_batches()))


def test_buckets_of_an_unpartitioned_table_get_their_own_write_tasks(spark: Any, db: str) -> None:
    """Clustered by the bare bucket number, Spark's hash partitioning sends buckets 0 and 1 of 2 to the same task
    of 2; the catalog clusters an unpartitioned table by the bucket's slot value instead (BucketSlotFunction)."""
    spark.sql(f"CREATE TABLE managed.{db}.u (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED) "
              "TBLPROPERTIES ('bucket' = '2')")
    plan = "\n".join(r[0] for r in spark.sql(
        f"EXPLAIN INSERT INTO managed.{db}.u SELECT id, 'x' FROM range(10)").collect())
    assert "BucketSlotFunction$OneColumn" in plan and "REPARTITION_BY_NUM" in plan, plan   # compiled: .invoke(id)
    for buckets, tasks in [(2, 2), (4, 2), (5, 5), (16, 3)]:
        bucket = f"tablestore_bucket:{buckets}:int64"
        slot = f"tablestore_bucket_slot:{tasks}:{bucket}"
        pairs = rows(spark, f"SELECT DISTINCT managed.`{bucket}`(id), pmod(hash(managed.`{slot}`(id)), {tasks}) "
                            "FROM range(1000)")
        assert sorted(pairs) == [(b, b % tasks) for b in range(buckets)]   # task b % tasks: all busy
    assert [r[0] for r in spark.sql("SELECT pmod(hash(b), 2) FROM VALUES (0), (1) AS t(b)").collect()] == [1, 1]


def test_the_catalog_service_restarts_when_it_died(spark: Any, db: str) -> None:
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == jvm and b"tablestore.spark.catalog_service" in cmdline:
            os.kill(int(entry.name), signal.SIGKILL)   # the catalog's and, after a write, the commits' one
            killed += 1
    assert killed >= 1
    spark.sql(f"CREATE TABLE managed.{db}.after (id BIGINT)")   # a new helper process answers
    assert rows(spark, f"SHOW TABLES IN managed.{db}") == [(db, "after", False)]
    spark.sql(f"INSERT INTO managed.{db}.after VALUES (1), (2)")   # and a new commit service commits
    assert rows(spark, f"SELECT id FROM managed.{db}.after ORDER BY id") == [(1,), (2,)]


def test_sql_reads_compacted_splits_with_spark_s_parquet_reader(spark: Any, python_catalog: tablestore.Catalog,
                                                               db: str) -> None:
    spark.sql(ORDERS.format(db=db))
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (1, 'a', 1.5, 'x'), (2, 'b', 2.5, 'y'), (3, 'a', 3.5, 'z')")
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (2, 'b', 9.5, 'updated')")
    python_catalog.get_table(f"{db}.orders").compact(full=True)   # one sorted run per bucket: no merge needed
    query = spark.sql(f"SELECT id, dt, amount, note FROM managed.{db}.orders")
    assert "ColumnarToRow" in query._jdf.queryExecution().executedPlan().toString()   # Spark's vectorized reader
    assert sorted(tuple(r) for r in query.collect()) == [
        (1, "a", Decimal("1.50"), "x"), (2, "b", Decimal("9.50"), "updated"), (3, "a", Decimal("3.50"), "z")]
    if not PYSPARK_4_1:   # the _row_kind metadata column (4.2+) over the vectorized reader's rows
        assert rows(spark, f"SELECT _row_kind, id FROM managed.{db}.orders ORDER BY id") == [
            ("+I", 1), ("+I", 2), ("+I", 3)]
    spark.sql(f"DELETE FROM managed.{db}.orders WHERE id = 3")   # now a merge again: Python reads that split
    assert rows(spark, f"SELECT id FROM managed.{db}.orders ORDER BY id") == [(1,), (2,)]


def _table_classes(df: Any) -> set[str]:
    """The JVM classes of the tables a DataFrame's analysed plan reads."""
    plan = df._jdf.queryExecution().analyzed()
    found: set[str] = set()

    def walk(node: Any) -> None:
        if node.getClass().getSimpleName() == "DataSourceV2Relation":
            found.add(node.table().getClass().getName())
        children = node.children()
        for i in range(children.size()):
            walk(children.apply(i))

    walk(plan)
    return found


def test_both_front_doors_load_one_table_class_that_behaves_alike(spark: Any, spark_warehouse: Path,
                                                                  python_catalog: tablestore.Catalog,
                                                                  db: str) -> None:
    spark.sql(ORDERS.format(db=db))
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (1, 'a', 1.5, 'x'), (2, 'b', 2.5, 'y'), (3, 'a', 3.5, 'z')")
    source = spark.createDataFrame([(4, "b", Decimal("4.50"), "w")], "id long, dt string, amount decimal(10,2), "
                                   "note string")
    source.write.format("managed").option("warehouse", str(spark_warehouse)).mode("append").save(f"{db}.orders")
    python_catalog.get_table(f"{db}.orders").compact(full=True)   # raw splits for both readers
    by_sql = spark.sql(f"SELECT * FROM managed.{db}.orders")
    by_source = spark.read.format("managed").option("warehouse", str(spark_warehouse)).load(f"{db}.orders")
    assert _table_classes(by_sql) == _table_classes(by_source) == {"tablestore.spark.jvm.catalog.ManagedTable"}
    for df in (by_sql, by_source):   # the same scan: Spark's vectorized reader for the compacted buckets
        assert "ColumnarToRow" in df._jdf.queryExecution().executedPlan().toString()
    assert sorted(map(tuple, by_sql.collect())) == sorted(map(tuple, by_source.collect())) == [
        (1, "a", Decimal("1.50"), "x"), (2, "b", Decimal("2.50"), "y"), (3, "a", Decimal("3.50"), "z"),
        (4, "b", Decimal("4.50"), "w")]
    if not PYSPARK_4_1:   # the same metadata column
        assert sorted(map(tuple, by_source.select("_row_kind", "id").collect())) == [
            ("+I", 1), ("+I", 2), ("+I", 3), ("+I", 4)]
