"""The SQL operations of the `managed` catalog through the helper's seam (action name + args, as the JVM sends them;
no Spark): compaction, snapshot expiry, DESCRIBE DETAIL, DELETE and the system tables, with their results."""
from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import catalog
import tablestore
from tablestore.spark.sql_actions import ACTIONS

ID_IS_10 = '[{"op": "=", "args": [{"ref": ["id"]}, {"lit": "10", "type": "bigint"}]}]'   # as PredicateJson sends it
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("amount", pa.float64())])


def call(warehouse: str, action: str, **args: Any) -> list[dict[str, Any]]:
    """The action's result rows as {column: value}, after checking the result's shape (schema + rows)."""
    result = ACTIONS[action]({"warehouse": warehouse, "options": {}, **args})
    names = [c.split("` ")[0].strip("` ") for c in _split_columns(result["schema"])]
    assert all(len(r) == len(names) for r in result["rows"])
    return [dict(zip(names, r)) for r in result["rows"]]


def _split_columns(ddl: str) -> list[str]:
    """Top-level columns of a DDL (commas inside MAP<..., ...> do not split)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(ddl):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    return parts + [ddl[start:]]


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.orders", schema=SCHEMA, primary_key=["id", "dt"], partition_by=["dt"],
                         options={"bucket": "1", "write-only": "true"})
    for i in range(3):
        t.write(pa.table({"id": [i, i + 10, i + 20], "dt": ["2024-01-01", "2024-01-01", "2024-01-02"],
                          "amount": [1.0, 2.0, 3.0]}, schema=SCHEMA))
    return str(tmp_path)


def table(warehouse: str, name: str = "db.orders") -> tablestore.Table:
    return tablestore.Catalog(warehouse).get_table(name)


def test_compact_one_partition_reports_files_before_and_after(warehouse: str) -> None:
    [row] = call(warehouse, "compact", table="db.orders", partitions="dt=2024-01-01")
    assert row["table"] == "db.orders" and row["full"] is True and row["snapshot_id"] == 4
    assert row["files_before"] == 3 and row["max_runs_per_bucket_before"] == 3   # one file per write
    assert row["files_after"] == 1 and row["max_runs_per_bucket_after"] == 1
    assert row["bytes_before"] > row["bytes_after"] > 0
    partitions: Any = table(warehouse).describe()["partitions"]
    detail = {tuple(p["partition"].values()): p["compacted"] for p in partitions}
    assert detail == {("2024-01-01",): True, ("2024-01-02",): False}   # the other partition was left alone


def test_compact_several_partitions_and_nothing_left_to_do(warehouse: str) -> None:
    [row] = call(warehouse, "compact", table="db.orders", partitions="dt=2024-01-01;dt=2024-01-02")
    assert (row["files_before"], row["max_runs_per_bucket_after"]) == (6, 1)
    [again] = call(warehouse, "compact", table="db.orders")
    assert again["snapshot_id"] is None and again["files_before"] == again["files_after"] == row["files_after"]


def test_compact_errors_name_the_problem(warehouse: str) -> None:
    with pytest.raises(tablestore.TableStoreError, match="amount.*not partition columns"):
        call(warehouse, "compact", table="db.orders", partitions="amount=1")
    with pytest.raises(tablestore.TableStoreError, match="column=value"):
        call(warehouse, "compact", table="db.orders", partitions="2024-01-01")
    with pytest.raises(tablestore.TableNotFoundError, match="db.nope"):
        call(warehouse, "compact", table="db.nope")


def test_expire_snapshots_keeps_the_newest_retain_last(warehouse: str) -> None:
    [row] = call(warehouse, "expire_snapshots", table="db.orders", retain_last=2)
    assert (row["expired_snapshots"], row["expired_ids"]) == (1, [1])
    assert [s.id for s in table(warehouse).snapshots()] == [2, 3]
    assert table(warehouse).read().num_rows == 9   # the data is the latest snapshot's
    [row] = call(warehouse, "expire_snapshots", table="db.orders")   # table options: 10 retained at least
    assert row["expired_snapshots"] == 0
    with pytest.raises(tablestore.TableStoreError, match="retain_last must be .* at least 1"):
        call(warehouse, "expire_snapshots", table="db.orders", retain_last=0)


def test_expire_partitions_returns_the_partitions_dropped(warehouse: str) -> None:
    """Paimon's `expire_partitions(table, expiration_time, timestamp_formatter, timestamp_pattern)`: arguments
    override the table's options for the call; the partitions dropped are rows, Hive style."""
    with pytest.raises(tablestore.TableStoreError, match="'db.orders'.*'partition.expiration-time' is not set"):
        call(warehouse, "expire_partitions", table="db.orders")
    with pytest.raises(catalog.InvalidOptionError, match="'db.orders'.*expire_strategy 'update-time'"):
        call(warehouse, "expire_partitions", table="db.orders", expiration_time="1 d", expire_strategy="update-time")
    with pytest.raises(catalog.InvalidOptionError, match="'db.orders'.*'partition.timestamp-pattern'.*\\$id"):
        call(warehouse, "expire_partitions", table="db.orders", expiration_time="1 d", timestamp_pattern="$id")
    rows = call(warehouse, "expire_partitions", table="db.orders", expiration_time="1 d",
                timestamp_pattern="$dt 12:00", timestamp_formatter="yyyy-MM-dd HH:mm")
    assert rows == [{"expired_partitions": "dt=2024-01-01"}, {"expired_partitions": "dt=2024-01-02"}]
    assert table(warehouse).read().num_rows == 0 and table(warehouse).snapshots()[-1].kind == "OVERWRITE"
    assert call(warehouse, "expire_partitions", table="db.orders", expiration_time="1 d") == []


def test_describe_detail_of_the_table(warehouse: str) -> None:
    [row] = call(warehouse, "describe_detail", table="db.orders")
    t = table(warehouse)
    assert (row["name"], row["path"], row["file_format"], row["bucket"]) == ("db.orders", t.path, "parquet", 1)
    assert (row["primary_key"], row["partition_by"], row["log_system"]) == (["id", "dt"], ["dt"], "none")
    assert row["options"]["write-only"] == "true"
    assert (row["latest_snapshot_id"], row["snapshot_count"], row["record_count"]) == (3, 3, 9)
    assert (row["num_files"], row["num_partitions"], row["compacted"]) == (6, 2, False)
    assert row["files_per_level"] == {"0": 6} and row["total_file_size"] > 0
    assert row["last_modified"] == t.snapshots()[-1].time_millis


def test_describe_detail_of_a_partition(warehouse: str) -> None:
    call(warehouse, "compact", table="db.orders", partitions="dt=2024-01-02")
    [row] = call(warehouse, "describe_detail", table="db.orders", partition="dt=2024-01-02")
    assert (row["partition"], row["num_files"], row["record_count"], row["compacted"]) == ("dt=2024-01-02", 1, 3, True)
    assert row["sorted_runs"] == {"0": 1}
    assert dt.datetime.fromtimestamp(row["last_modified"] / 1000) > dt.datetime(2020, 1, 1)
    assert call(warehouse, "describe_detail", table="db.orders", partition="dt=2023-12-31") == []


def test_delete_on_a_primary_key_table_writes_deletes_in_one_commit(warehouse: str) -> None:
    before = table(warehouse).latest_snapshot_id()
    [row] = call(warehouse, "delete_where", table="db.orders", predicate=ID_IS_10)
    assert row == {"snapshot_id": before + 1, "deleted_rows": 1}   # type: ignore[operator]
    ids = sorted(table(warehouse).read().column("id").to_pylist())
    assert ids == [0, 1, 2, 11, 12, 20, 21, 22]
    assert call(warehouse, "delete_where", table="db.orders", predicate=ID_IS_10) == [
        {"snapshot_id": None, "deleted_rows": 0}]   # nothing matched: nothing committed


def test_delete_on_a_table_without_primary_key_deletes_each_copy(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.log", schema=SCHEMA, options={"bucket": "1"})
    t.write(pa.table({"id": [1, 1, 2], "dt": ["a", "a", "a"], "amount": [1.0, 1.0, 2.0]}, schema=SCHEMA))
    t.write(pa.table({"id": [1, 3], "dt": ["a", "a"], "amount": [1.0, 3.0]}, schema=SCHEMA))
    result = t.delete(pc.field("id") == 1)
    assert result.deleted_rows == 3
    assert sorted(t.read().column("id").to_pylist()) == [2, 3]
    t.write(pa.table({"id": [1], "dt": ["a"], "amount": [1.0]}, schema=SCHEMA))   # a later insert is not hidden
    assert sorted(t.read().column("id").to_pylist()) == [1, 2, 3]


def test_delete_retries_when_another_writer_commits_between_read_and_write(
        warehouse: str, monkeypatch: pytest.MonkeyPatch) -> None:
    t = table(warehouse)
    other = table(warehouse)
    read = tablestore.Table.read
    raced: list[int | None] = []

    def racing_read(self: tablestore.Table, *a: Any, **k: Any) -> pa.Table:
        rows = read(self, *a, **k)
        if not raced:   # the first attempt read ids 20-22; meanwhile another writer updates 20, adds 5
            raced.append(other.write(pa.table({"id": [20, 5], "dt": ["2024-01-02"] * 2, "amount": [1.0, 5.0]},
                                              schema=SCHEMA)))
        return rows

    monkeypatch.setattr(tablestore.Table, "read", racing_read)
    result = t.delete(pc.field("amount") >= 3.0)   # re-planned: ids 21, 22 and 5 match, 20 no longer does
    monkeypatch.undo()
    assert result.deleted_rows == 3 and raced
    assert sorted(t.read().column("id").to_pylist()) == [0, 1, 2, 10, 11, 12, 20]


def test_system_tables_list_snapshots_and_files(warehouse: str) -> None:
    snaps = call(warehouse, "system_table", table="db.orders", name="snapshots")
    assert [(s["snapshot_id"], s["kind"], s["total_record_count"]) for s in snaps] == [
        (1, "APPEND", 3), (2, "APPEND", 6), (3, "APPEND", 9)]
    assert all(s["delta_record_count"] == 3 and s["log_offsets"] == {} for s in snaps)
    files = call(warehouse, "system_table", table="db.orders", name="files")
    assert len(files) == 6 and sum(f["record_count"] for f in files) == 9
    assert {f["partition"] for f in files} == {"dt=2024-01-01", "dt=2024-01-02"}
    assert {f["level"] for f in files} == {0} and {f["bucket"] for f in files} == {0}
    assert call(warehouse, "system_table", table="db.orders", name="files", schema_only=True) == []
    with pytest.raises(tablestore.TableStoreError,
                       match=r"db.orders\$nope is not a system table.*\$snapshots, \$files, \$schemas"):
        call(warehouse, "system_table", table="db.orders", name="nope")


def test_the_catalog_service_serves_these_actions(warehouse: str) -> None:
    from tablestore.spark.catalog_service import actions, handle

    assert set(ACTIONS) <= set(actions())
    response = handle({"id": 7, "action": "describe_detail", "args": {"warehouse": warehouse, "options": {},
                                                                        "table": ["db", "orders"]}}, actions())
    assert response["ok"] and response["result"]["rows"][0][0] == "db.orders"
    response = handle({"id": 8, "action": "compact", "args": {"warehouse": warehouse, "table": "db.nope"}}, actions())
    assert response["error"]["type"] == "TableNotFoundError"


@pytest.mark.kafka
def test_describe_detail_and_snapshots_of_a_table_with_a_log(tmp_path: Path, kafka_bootstrap: str) -> None:
    options = {"table-storage.log.properties.bootstrap.servers": kafka_bootstrap}
    cat = tablestore.Catalog(str(tmp_path), options=options)
    cat.create_database("db")
    t = cat.create_table("db.logged", schema=SCHEMA, primary_key=["id"], options={"bucket": "1"})
    try:
        t.write(pa.table({"id": [1, 2], "dt": ["a", "b"], "amount": [1.0, 2.0]}, schema=SCHEMA))
        args = {"table": "db.logged", "options": options}
        [row] = call(str(tmp_path), "describe_detail", **args)
        assert (row["log_system"], row["log_topic"], row["log_bootstrap_servers"]) == (
            "kafka", t.options["log.topic"], kafka_bootstrap)
        assert row["log"]["retention"] == "cluster default" and row["log"]["changelog-mode"] == "upsert"
        [snap] = call(str(tmp_path), "system_table", name="snapshots", **args)
        assert snap["log_offsets"] == {0: 2}   # Kafka partition 0 (bucket 0) up to offset 2
    finally:
        t.close()
        cat.drop_table("db.logged")
