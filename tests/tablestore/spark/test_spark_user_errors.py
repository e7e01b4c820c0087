"""Errors a user of `format("managed")` and the SQL catalog reads, as PySpark shows them: an unknown option of a read,
write or stream is refused with the table's name and a "did you mean" (never silently ignored); a null primary key
or a column of the wrong type in a `df.write` is one line naming the table, the column (and both types); a nullable
primary key declared in SQL (and a keyed CTAS) is made NOT NULL; Paimon's system tables beyond `$snapshots` /
`$files` answer what was written."""
from __future__ import annotations

import datetime as dt
import itertools
import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest

import tablestore
from tablestore.spark.source_options import DataSourceOptionError, check_options

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
_names = itertools.count()


@pytest.fixture
def table(spark_warehouse: Path) -> tablestore.Table:
    cat = tablestore.Catalog(str(spark_warehouse))
    cat.create_database("errdb", ignore_if_exists=True)
    return cat.create_table(f"errdb.t{next(_names)}", SCHEMA, primary_key=["id"], options={"bucket": "2"})


def _first_line(error: BaseException) -> str:
    return str(error).splitlines()[0]


def test_check_options_accepts_the_declared_options_and_names_the_unknown() -> None:
    check_options({"path": "db.t", "warehouse": "/wh", "table-storage.bucket": "2", "s3.endpoint": "x",
                   "__raw-plan": "f", "snapshot-id": "1"}, "read")
    check_options({"path": "db.t", "checkpointLocation": "/ck", "change-tracking": "false"}, "stream-write")
    with pytest.raises(DataSourceOptionError, match=r"^table 'db.t': unknown read option 'snapshot-idd' "
                                                    r"\(did you mean 'snapshot-id'\?\); valid options: path, "):
        check_options({"path": "db.t", "snapshot-idd": "1"}, "read")
    with pytest.raises(DataSourceOptionError, match=r"unknown write option 'snapshot-id' \(it is a read option: "
                                                    r"only batch reads take it\)"):
        check_options({"path": "db.t", "snapshot-id": "1"}, "write")
    with pytest.raises(DataSourceOptionError, match=r"'bukket' \(did you mean the table option 'bucket'\?"):
        check_options({"table": "db.t", "bukket": "2"}, "write")


def test_an_unknown_read_option_is_an_error_naming_it_and_the_table(spark: Any, table: tablestore.Table) -> None:
    table.write(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    with pytest.raises(Exception) as e:
        spark.read.format("managed").option("snapshot-idd", "1").load(table.name).collect()
    assert _first_line(e.value).startswith(
        f"DataSourceOptionError: table '{table.name}': unknown option 'snapshot-idd' (did you mean 'snapshot-id'?)")
    assert len(str(e.value).splitlines()) == 1
    assert spark.read.format("managed").option("snapshot-id", "1").load(table.name).count() == 1   # a known one
    with pytest.raises(Exception, match=f"table '{table.name}': unknown stream-read option 'scna' "
                                        "\\(did you mean 'scan'"):
        spark.readStream.format("managed").option("scna", "latest").load(table.name)


def test_an_unknown_write_option_is_an_error_and_writes_nothing(spark: Any, table: tablestore.Table) -> None:
    df = spark.createDataFrame([(1, "a")], "id long, v string")
    with pytest.raises(Exception) as e:
        df.write.format("managed").option("bukket", "2").mode("append").save(table.name)
    assert _first_line(e.value).startswith(
        f"DataSourceOptionError: table '{table.name}': unknown option 'bukket' (did you mean the table option "
        "'bucket'?")
    assert table.snapshots() == []
    with pytest.raises(Exception) as e:
        df.write.format("managed").option("snapshot-id", "1").mode("append").save(table.name)
    assert str(e.value).splitlines()[0].startswith(
        f"DataSourceOptionError: table '{table.name}': unknown write option 'snapshot-id' (it is a read option: only "
        "batch reads take it)")
    assert table.snapshots() == []


@pytest.mark.parametrize("option", ["overwrite-mode", "jvm-writer"])
def test_a_batch_read_given_a_write_option_is_one_line(spark: Any, table: tablestore.Table, option: str) -> None:
    table.write(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    with pytest.raises(Exception) as e:
        spark.read.format("managed").option(option, "static").load(table.name).collect()
    assert str(e.value).splitlines() == [
        f"DataSourceOptionError: table '{table.name}': unknown read option '{option}' (it is a write option: only "
        f"batch writes {'and streaming writes ' if option == 'overwrite-mode' else ''}take it); valid options: path, "
        "paths, table, warehouse, table-storage.*, s3.*, snapshot-id, timestamp-ms"]
    assert type(e.value).__name__ == "AnalysisException"


def test_an_unknown_stream_write_option_is_an_error(spark: Any, table: tablestore.Table, tmp_path: Path) -> None:
    stream = spark.readStream.format("rate").option("rowsPerSecond", "1").load().selectExpr("value AS id",
                                                                                           "'x' AS v")
    with pytest.raises(Exception, match=f"table '{table.name}': unknown (stream-write )?option 'bukket'"):
        query = (stream.writeStream.format("managed").option("checkpointLocation", str(tmp_path / "ck"))
                 .option("bukket", "2").trigger(availableNow=True).start(table.name))
        query.awaitTermination(120)
        raise AssertionError("the stream started")   # pragma: no cover
    assert table.snapshots() == []


@pytest.mark.parametrize("jvm_writer", ["true", "false"])
def test_a_null_primary_key_in_a_write_is_one_line_naming_table_and_column(spark: Any, table: tablestore.Table,
                                                                          jvm_writer: str) -> None:
    df = spark.createDataFrame([(None, "a"), (1, "b"), (2, "c")], "id long, v string").repartition(2)
    with pytest.raises(Exception) as e:
        df.write.format("managed").option("jvm-writer", jvm_writer).mode("append").save(table.name)
    assert str(e.value).splitlines() == [f"InvalidWriteError: table '{table.name}': primary-key column 'id' has nulls"]
    # PySpark 4.2+: a PythonException; 4.1 converts a job's PythonException only from a UDF, so there it is an
    # IllegalArgumentException (java_versions/spark-4.1 TableStoreTaskError), the same one line
    assert isinstance(e.value, tablestore.TableStoreError) or type(e.value).__name__ in (
        "PythonException", "IllegalArgumentException")
    assert table.snapshots() == [] and table.read().num_rows == 0


def test_a_column_of_another_type_is_one_line_naming_table_column_and_types(spark: Any,
                                                                           table: tablestore.Table) -> None:
    df = spark.createDataFrame([(1, 2), (3, 4)], "id long, v int").repartition(2)
    with pytest.raises(Exception) as e:
        df.write.format("managed").mode("append").save(table.name)
    assert str(e.value).splitlines() == [
        f"SchemaMismatchError: table '{table.name}': column 'v' has type int32, the table's type is string: a cast "
        "between these types would change what the values mean"]
    assert table.snapshots() == []


@pytest.mark.parametrize("through", ["data source", "SQL catalog"])
def test_a_null_primary_key_in_a_streaming_write_is_one_line_and_commits_nothing(
        spark: Any, table: tablestore.Table, tmp_path: Path, through: str) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "0.json").write_text('{"id": 1, "v": "a"}\n{"id": 2, "v": "b"}\n')

    def run() -> None:   # every file the source holds, then the query stops
        stream = spark.readStream.schema("id long, v string").option("maxFilesPerTrigger", 1).json(str(source))
        writer = stream.writeStream.option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
        query = (writer.format("managed").start(table.name) if through == "data source"
                 else writer.toTable(f"managed.{table.name}"))
        try:
            query.awaitTermination(180)
        finally:
            query.stop()

    run()
    assert len(table.snapshots()) == 1
    (source / "1.json").write_text('{"id": 3, "v": "c"}\n{"id": null, "v": "d"}\n{"id": 4, "v": "e"}\n')
    with pytest.raises(Exception) as e:
        run()
    assert type(e.value).__name__ == "StreamingQueryException"
    line = f"InvalidWriteError: table '{table.name}': primary-key column 'id' has nulls"
    first = str(e.value).splitlines()[0]   # Spark's "[STREAM_FAILED] Query [id = ..] terminated with exception: "
    assert first.startswith("[STREAM_FAILED] Query [id = ") and line in first, first
    assert "Traceback" not in str(e.value) and "PYTHON_EXCEPTION" not in str(e.value)
    assert len(table.snapshots()) == 1   # nothing of the failed micro-batch
    assert sorted(table.read().column("id").to_pylist()) == [1, 2]
    orphans = table.remove_orphan_files(older_than=dt.timedelta(0))
    assert [p for p in orphans if p.endswith(".parquet")] == []   # its tasks' files were deleted


@pytest.fixture
def db(spark: Any) -> Iterator[str]:
    name = f"errsql{next(_names)}"
    spark.sql(f"CREATE DATABASE managed.{name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS managed.{name} CASCADE")


def test_a_null_in_a_not_null_column_of_a_sql_write_is_one_line_naming_table_and_column(
        spark: Any, db: str, spark_warehouse: Path) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.t (id BIGINT NOT NULL, v STRING, n INT NOT NULL) "
              "TBLPROPERTIES ('primary-key' = 'id', 'bucket' = '2')")
    key = f"InvalidWriteError: table '{db}.t': primary-key column 'id' has nulls"
    statements = {
        f"INSERT INTO managed.{db}.t VALUES (null, 'x', 1)": key,      # planned on the driver
        f"INSERT INTO managed.{db}.t (v, id, n) SELECT 'a', IF(id = 3000, NULL, id), 1 FROM range(5000)": key,  # a task
        f"INSERT INTO managed.{db}.t VALUES (1, 'x', null)":
            f"InvalidWriteError: table '{db}.t': column 'n' is NOT NULL and has nulls",
        f"MERGE INTO managed.{db}.t t USING (SELECT CAST(NULL AS BIGINT) AS id, 'm' AS v, 1 AS n) s ON t.id = s.id "
        "WHEN NOT MATCHED THEN INSERT *": key,
    }
    for statement, line in statements.items():
        with pytest.raises(Exception) as e:
            spark.sql(statement)
        assert str(e.value).splitlines() == [line], statement
        assert type(e.value).__name__ == "IllegalArgumentException"
    with pytest.raises(Exception) as e:
        spark.createDataFrame([(None, "a", 1)], "id long, v string, n int").writeTo(f"managed.{db}.t").append()
    assert str(e.value).splitlines() == [key]
    table = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.t")
    assert table.snapshots() == []
    spark.sql(f"INSERT INTO managed.{db}.t VALUES (1, 'x', 1)")   # values that fit are written as before
    assert [tuple(r) for r in spark.table(f"managed.{db}.t").collect()] == [(1, "x", 1)]
    with pytest.raises(Exception) as e:
        spark.sql(f"UPDATE managed.{db}.t SET n = CAST(NULL AS INT) WHERE id = 1")
    assert str(e.value).splitlines() == [f"InvalidWriteError: table '{db}.t': column 'n' is NOT NULL and has nulls"]
    assert len(table.snapshots()) == 1


def test_a_nullable_primary_key_in_sql_is_made_not_null(spark: Any, db: str, spark_warehouse: Path) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.k (id BIGINT, v STRING) TBLPROPERTIES ('primary-key' = 'id')")
    spark.sql(f"CREATE TABLE managed.{db}.c TBLPROPERTIES ('primary-key' = 'id') AS "
              "SELECT id, CAST(id * 2 AS STRING) AS v FROM range(3)")
    cat = tablestore.Catalog(str(spark_warehouse))
    for name in ("k", "c"):
        t = cat.get_table(f"{db}.{name}")
        assert t.primary_key == ["id"] and not t.schema.field("id").nullable and t.schema.field("v").nullable
    assert sorted(tuple(r) for r in spark.table(f"managed.{db}.c").collect()) == [(0, "0"), (1, "2"), (2, "4")]
    spark.sql(f"INSERT INTO managed.{db}.c VALUES (1, 'one')")
    assert spark.sql(f"SELECT v FROM managed.{db}.c WHERE id = 1").collect()[0].v == "one"


def test_paimons_system_tables_show_what_was_written(spark: Any, db: str, spark_warehouse: Path) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.t (id BIGINT NOT NULL, v STRING, dt STRING NOT NULL) PARTITIONED BY (dt) "
              "TBLPROPERTIES ('primary-key' = 'id,dt', 'bucket' = '2', 'write-only' = 'true')")
    spark.sql(f"INSERT INTO managed.{db}.t VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'y')")
    spark.sql(f"INSERT INTO managed.{db}.t VALUES (1, 'A', 'x'), (4, 'd', 'y')")
    spark.sql(f"ALTER TABLE managed.{db}.t ADD COLUMNS (n INT)")
    table = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.t")

    def rows(name: str) -> list[dict[str, Any]]:
        return [r.asDict(recursive=True) for r in spark.sql(f"SELECT * FROM managed.{db}.`t${name}`").collect()]

    schemas = rows("schemas")
    assert [s["schema_id"] for s in schemas] == [0, 1]
    assert [f["name"] for f in json.loads(schemas[1]["fields"])] == ["id", "v", "dt", "n"]
    assert schemas[1]["primary_keys"] == ["id", "dt"] and schemas[1]["partition_keys"] == ["dt"]
    assert schemas[0]["options"]["bucket"] == "2" and isinstance(schemas[0]["update_time"], dt.datetime)
    assert {r["key"]: r["value"] for r in rows("options")} == dict(table.options)
    files = table.files()
    per_partition: dict[str, list[int]] = {}
    for f in files:
        part: Any = f["partition"]
        total = per_partition.setdefault(f"dt={part['dt']}", [0, 0, 0])
        total[0] += int(f["row_count"])  # type: ignore[call-overload]
        total[1] += int(f["file_size"])  # type: ignore[call-overload]
        total[2] += 1
    assert {p["partition"]: [p["record_count"], p["file_size_in_bytes"], p["file_count"]]
            for p in rows("partitions")} == per_partition
    buckets = rows("buckets")
    assert sum(b["file_count"] for b in buckets) == len(files) and {b["bucket"] for b in buckets} <= {0, 1}
    assert sum(b["record_count"] for b in buckets) == 5
    manifests = rows("manifests")
    assert sum(m["num_added_files"] for m in manifests) == len(files)
    assert all(m["file_name"].startswith("manifest-") for m in manifests)
    latest = sorted((r["_row_kind"], r["id"], r["v"]) for r in rows("latest_changes"))
    assert latest == [("+I", 4, "d"), ("+U", 1, "A"), ("-U", 1, "a")]   # the last commit's changelog
    assert table.system_table("latest_changes").num_rows == 3           # the Python API's view
    audit = spark.sql(f"SELECT * FROM managed.{db}.`t$audit_log`")
    assert audit.columns == ["rowkind", "id", "v", "dt", "n"]           # Paimon's: every row with its row kind
    live = [("+I", 1, "A", "x", None), ("+I", 2, "b", "x", None), ("+I", 3, "c", "y", None),
            ("+I", 4, "d", "y", None)]
    assert sorted(tuple(r) for r in audit.collect()) == live
    assert table.compact(full=True) is not None                         # changes no row: all still show
    assert sorted(tuple(r) for r in audit.collect()) == live and rows("latest_changes") == []
    with pytest.raises(Exception, match=r"is not a system table.*\$schemas, \$options, \$partitions.*"
                                        r"\$audit_log, \$latest_changes"):
        spark.sql(f"SELECT * FROM managed.{db}.`t$nope`").collect()
