"""Spark SQL operations on managed tables, from PySpark (the session of conftest, one database per test): the
procedures (CALL managed.system.compact / expire_snapshots, SHOW PROCEDURES), DESCRIBE DETAIL and ALTER TABLE ...
COMPACT (the SQL extension's rewrite), DELETE FROM and the system tables `t$snapshots` / `t$files` (MERGE INTO and
UPDATE: test_spark_sql_merge.py)."""
from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any, Iterator

import pytest

import tablestore

pytestmark = pytest.mark.spark

_names = itertools.count()


@pytest.fixture
def db(spark: Any) -> Iterator[str]:
    name = f"opsdb{next(_names)}"
    spark.sql(f"CREATE DATABASE managed.{name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS managed.{name} CASCADE")


def rows(spark: Any, sql: str) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in spark.sql(sql).collect()]


ORDERS = """CREATE TABLE managed.{db}.orders (
  id BIGINT NOT NULL, dt STRING NOT NULL, amount DECIMAL(10,2), PRIMARY KEY (id, dt) NOT ENFORCED)
PARTITIONED BY (dt) TBLPROPERTIES ('bucket' = '1', 'write-only' = 'true')"""


@pytest.fixture
def orders(spark: Any, db: str) -> str:
    """db.orders with three commits, each one file in partitions 2024-01-01 and 2024-01-02."""
    spark.sql(ORDERS.format(db=db))
    for i in range(3):
        spark.sql(f"INSERT INTO managed.{db}.orders VALUES ({i}, '2024-01-01', {i}.5), ({i + 10}, '2024-01-01', 1), "
                  f"({i + 20}, '2024-01-02', 2)")
    return f"{db}.orders"


def test_call_compact_one_partition_then_describe_detail_shows_it(spark: Any, orders: str,
                                                                 spark_warehouse: Path) -> None:
    [row] = rows(spark, f"CALL managed.system.compact(table => '{orders}', partitions => 'dt=2024-01-01')")
    assert (row["table"], row["snapshot_id"], row["full"]) == (orders, 4, True)
    assert (row["files_before"], row["files_after"], row["max_runs_per_bucket_after"]) == (3, 1, 1)
    parts = rows(spark, f"DESCRIBE DETAIL managed.{orders} PARTITION (dt = '2024-01-01')")
    assert [(p["partition"], p["num_files"], p["record_count"], p["compacted"]) for p in parts] == [
        ("dt=2024-01-01", 1, 6, True)]
    [other] = rows(spark, f"describe detail managed.{orders} partition (dt = \"2024-01-02\");")
    assert (other["num_files"], other["compacted"], other["sorted_runs"]) == (3, False, {0: 3})
    table = tablestore.Catalog(str(spark_warehouse)).get_table(orders)
    assert table.latest_snapshot_id() == 4   # the Python API sees the SQL compaction


@pytest.mark.parametrize("runners", ["executors", "driver"])
def test_call_compact_rewrites_the_buckets_in_spark_tasks_or_in_the_driver(spark: Any, orders: str,
                                                                          runners: str) -> None:
    """`spark.tablestore.compaction.runners`: `executors` (on a cluster, the default) rewrites each bucket in a task
    of a Spark job and commits on the driver; `driver` (a local session's default) compacts in the catalog service.
    Both give the same table and the same report."""
    sc = spark.sparkContext
    group = f"compact-{runners}-{orders}"
    before = rows(spark, f"SELECT * FROM managed.{orders} ORDER BY id")
    spark.conf.set("spark.tablestore.compaction.runners", runners)
    sc.setJobGroup(group, "the CALL")
    try:
        [row] = rows(spark, f"CALL managed.system.compact(table => '{orders}', partitions => 'dt=2024-01-01')")
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
        spark.conf.unset("spark.tablestore.compaction.runners")
    assert (row["table"], row["snapshot_id"], row["full"]) == (orders, 4, True)
    assert (row["files_before"], row["files_after"], row["max_runs_per_bucket_after"]) == (3, 1, 1)
    assert len(sc.statusTracker().getJobIdsForGroup(group)) == (1 if runners == "executors" else 0)
    assert rows(spark, f"SELECT * FROM managed.{orders} ORDER BY id") == before
    db = orders.split(".")[0]
    assert rows(spark, f"SELECT kind FROM managed.{db}.`orders$snapshots` ORDER BY snapshot_id") == [
        {"kind": "APPEND"}] * 3 + [{"kind": "COMPACT"}]
    [again] = rows(spark, f"CALL managed.system.compact(table => '{orders}', partitions => 'dt=2024-01-01')")
    assert again["snapshot_id"] is None   # nothing left to compact there


def test_alter_table_compact_and_describe_detail_of_the_table(spark: Any, orders: str) -> None:
    db, name = orders.split(".")
    [row] = rows(spark, f"ALTER TABLE managed.`{db}`.{name} COMPACT")
    assert (row["files_before"], row["files_after"]) == (6, 2)
    [detail] = rows(spark, f"DESCRIBE DETAIL managed.{orders}")
    assert (detail["name"], detail["bucket"], detail["primary_key"], detail["partition_by"]) == (
        orders, 1, ["id", "dt"], ["dt"])
    assert (detail["num_files"], detail["num_partitions"], detail["compacted"], detail["record_count"]) == (
        2, 2, True, 9)
    assert detail["latest_snapshot_id"] == 4 and detail["log_system"] == "none"
    assert detail["last_modified"] > dt.datetime(2020, 1, 1)
    [again] = rows(spark, f"alter table managed.{orders} partition (dt = '2024-01-02') compact ;")
    assert again["snapshot_id"] is None   # nothing left to compact


def test_expire_snapshots_and_the_snapshots_system_table(spark: Any, orders: str) -> None:
    snaps = rows(spark, f"SELECT snapshot_id, kind, total_record_count FROM managed.{orders.split('.')[0]}."
                        f"`orders$snapshots` ORDER BY snapshot_id")
    assert snaps == [{"snapshot_id": 1, "kind": "APPEND", "total_record_count": 3},
                     {"snapshot_id": 2, "kind": "APPEND", "total_record_count": 6},
                     {"snapshot_id": 3, "kind": "APPEND", "total_record_count": 9}]
    [row] = rows(spark, f"CALL managed.system.expire_snapshots(table => '{orders}', retain_last => 1)")
    assert (row["expired_snapshots"], row["expired_ids"]) == (2, [1, 2])
    db = orders.split(".")[0]
    assert rows(spark, f"SELECT snapshot_id FROM managed.{db}.`orders$snapshots`") == [{"snapshot_id": 3}]
    assert spark.sql(f"SELECT count(*) AS n FROM managed.{orders}").first()["n"] == 9


def test_files_system_table_is_typed_and_current(spark: Any, orders: str) -> None:
    db = orders.split(".")[0]
    files = spark.table(f"managed.{db}.`orders$files`")
    assert [(f.name, f.dataType.simpleString()) for f in files.schema.fields][:4] == [
        ("partition", "string"), ("bucket", "int"), ("level", "int"), ("file_name", "string")]
    assert files.count() == 6
    spark.sql(f"CALL managed.system.compact(table => '{orders}')")
    assert files.count() == 2   # the same DataFrame, scanned again, sees the compaction
    assert rows(spark, f"SELECT partition, sum(record_count) AS n FROM managed.{db}.`orders$files` "
                       f"GROUP BY partition ORDER BY partition") == [
        {"partition": "dt=2024-01-01", "n": 6}, {"partition": "dt=2024-01-02", "n": 3}]


def test_show_procedures_and_errors(spark: Any, orders: str) -> None:
    names = [r["procedure_name"] for r in rows(spark, "SHOW PROCEDURES IN managed.system")]
    assert names == ["compact", "expire_snapshots", "expire_partitions", "describe_detail", "create_tag", "delete_tag",
                     "reset_consumer"]
    with pytest.raises(Exception, match="retain_last must be an integer of at least 1"):
        spark.sql(f"CALL managed.system.expire_snapshots(table => '{orders}', retain_last => 0)").collect()
    with pytest.raises(Exception, match="not partition columns"):
        spark.sql(f"ALTER TABLE managed.{orders} PARTITION (amount = 1) COMPACT").collect()
    db = orders.split(".")[0]
    with pytest.raises(Exception, match=r"orders\$nope is not a system table.*\$snapshots, \$files"):
        spark.sql(f"SELECT * FROM managed.{db}.`orders$nope`").collect()
    with pytest.raises(Exception, match="TABLE_OR_VIEW_NOT_FOUND"):
        spark.sql(f"SELECT * FROM managed.{db}.`missing$snapshots`").collect()


def test_delete_from_a_primary_key_table(spark: Any, orders: str, spark_warehouse: Path) -> None:
    spark.sql(f"DELETE FROM managed.{orders} WHERE id = 10")
    spark.sql(f"DELETE FROM managed.{orders} WHERE dt = '2024-01-02' AND id > 20")
    assert [r["id"] for r in rows(spark, f"SELECT id FROM managed.{orders} ORDER BY id")] == [0, 1, 2, 11, 12, 20]
    table = tablestore.Catalog(str(spark_warehouse)).get_table(orders)
    assert [s.kind for s in table.snapshots()][-2:] == ["APPEND", "APPEND"]   # one commit per DELETE
    spark.sql(f"DELETE FROM managed.{orders} WHERE id = 999")   # nothing matches: nothing committed
    assert table.latest_snapshot_id() == 5


def test_delete_from_a_table_without_primary_key(spark: Any, db: str) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.events (k STRING, v INT)")
    spark.sql(f"INSERT INTO managed.{db}.events VALUES ('a', 1), ('a', 1), ('b', 2), (NULL, 3)")
    spark.sql(f"DELETE FROM managed.{db}.events WHERE v = 1 OR k IS NULL")
    assert rows(spark, f"SELECT k, v FROM managed.{db}.events") == [{"k": "b", "v": 2}]
    spark.sql(f"DELETE FROM managed.{db}.events")   # no condition: every row (as -D changes, one commit)
    assert rows(spark, f"SELECT k, v FROM managed.{db}.events") == []
    spark.sql(f"INSERT INTO managed.{db}.events VALUES ('c', 3)")
    spark.sql(f"TRUNCATE TABLE managed.{db}.events")   # the same as DELETE without a condition
    assert rows(spark, f"SELECT k, v FROM managed.{db}.events") == []


def test_statements_resolve_names_in_the_current_catalog_and_database(spark: Any, orders: str) -> None:
    db = orders.split(".")[0]
    spark.sql(f"USE managed.{db}")
    try:
        [detail] = rows(spark, "DESC DETAIL orders")
        [compact] = rows(spark, f"/* compact */ ALTER TABLE {db}.`orders` COMPACT -- all partitions")
    finally:
        spark.sql("USE spark_catalog.default")
    assert (detail["name"], detail["num_files"], compact["files_after"]) == (orders, 6, 2)
    with pytest.raises(Exception, match="PARSE_SYNTAX_ERROR|Syntax error"):   # not a managed table: Spark's parser
        spark.sql("ALTER TABLE spark_catalog.default.nope COMPACT")


def test_paimon_s_sys_procedures_are_the_system_ones(spark: Any, orders: str) -> None:
    """Paimon's procedure namespace: `CALL sys.compact(...)`, qualified or in the managed catalog (issue 52)."""
    names = [r["procedure_name"] for r in rows(spark, "SHOW PROCEDURES IN managed.sys")]
    assert names == ["compact", "expire_snapshots", "expire_partitions", "describe_detail", "create_tag", "delete_tag",
                     "reset_consumer"]
    [row] = rows(spark, f"CALL managed.sys.compact(table => '{orders}', partitions => 'dt=2024-01-02')")
    assert (row["files_before"], row["files_after"]) == (3, 1)
    spark.sql(f"USE managed.{orders.split('.')[0]}")
    try:
        [expired] = rows(spark, f"CALL sys.expire_snapshots(table => '{orders}', retain_last => 2)")
    finally:
        spark.sql("USE spark_catalog.default")
    assert expired["expired_ids"] == [1, 2]


def test_call_expire_partitions_drops_old_partitions(spark: Any, db: str, spark_warehouse: Path) -> None:
    """Paimon's `expire_partitions` procedure: the partitions whose time (read from their values by the pattern
    and formatter) is older than the expiration time go in one OVERWRITE snapshot; one row per partition."""
    spark.sql(f"CREATE TABLE managed.{db}.events (dt STRING NOT NULL, hour INT NOT NULL, v INT) "
              f"PARTITIONED BY (dt, hour) TBLPROPERTIES ('log.system' = 'none', "
              f"'partition.timestamp-pattern' = '$dt $hour:00:00')")
    spark.sql(f"INSERT INTO managed.{db}.events VALUES ('2000-01-01', 1, 1), ('2000-01-01', 12, 2), "
              f"('2999-01-01', 0, 3)")
    with pytest.raises(Exception, match="'partition.expiration-time' is not set"):
        spark.sql(f"CALL managed.sys.expire_partitions(table => '{db}.events')").collect()
    expired = rows(spark, f"CALL managed.sys.expire_partitions(table => '{db}.events', expiration_time => '1 d')")
    assert expired == [{"expired_partitions": "dt=2000-01-01/hour=1"}, {"expired_partitions": "dt=2000-01-01/hour=12"}]
    assert rows(spark, f"SELECT v FROM managed.{db}.events") == [{"v": 3}]
    table = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.events")
    assert [s.kind for s in table.snapshots()] == ["APPEND", "OVERWRITE"]
    assert rows(spark, f"CALL managed.system.expire_partitions(table => '{db}.events', expiration_time => '1 d', "
                       f"timestamp_formatter => 'yyyy-MM-dd HH:mm:ss', timestamp_pattern => '$dt 00:00:00')") == []


def test_delta_s_describe_history_and_optimize(spark: Any, orders: str) -> None:
    """`DESCRIBE HISTORY` (the commits, newest first, as `$snapshots` has them) and `OPTIMIZE t [WHERE ...]` (a
    compaction of the partitions the predicate selects, which may name partition columns only), as in Delta."""
    history = rows(spark, f"DESCRIBE HISTORY managed.{orders}")
    assert [(h["snapshot_id"], h["kind"]) for h in history] == [(3, "APPEND"), (2, "APPEND"), (1, "APPEND")]
    assert [h["snapshot_id"] for h in rows(spark, f"describe history managed.{orders} limit 1;")] == [3]

    [row] = rows(spark, f"OPTIMIZE managed.{orders} WHERE dt >= '2024-01-02' AND dt < '2025'")
    assert (row["snapshot_id"], row["partitions"], row["files_before"], row["files_after"]) == (
        4, "dt=2024-01-02", 3, 1)
    [none] = rows(spark, f"OPTIMIZE managed.{orders} WHERE dt > '2030'")
    assert (none["snapshot_id"], none["files_before"]) == (None, 0)   # nothing selected: nothing compacted
    with pytest.raises(Exception, match=r"WHERE may name partition columns only \(dt\), not amount"):
        spark.sql(f"OPTIMIZE managed.{orders} WHERE amount > 1").collect()
    [whole] = rows(spark, f"optimize managed.{orders};")
    assert (whole["snapshot_id"], whole["files_after"]) == (5, 2)
    assert [h["kind"] for h in rows(spark, f"DESCRIBE HISTORY managed.{orders}")][:2] == ["COMPACT", "COMPACT"]
