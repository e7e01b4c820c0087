"""Streaming reads of changes (`tablestore.spark.read_changes`): a table without a log streams its snapshots as a
changelog, a table with a log streams the snapshot then the log; Trigger.AvailableNow stops; a restart from the
checkpoint resumes where the last run ended."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
import tablestore.spark
from tablestore.spark.stream_read import ADMISSION_CONTROL

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])
BOOTSTRAP = "table-storage.log.properties.bootstrap.servers"


def _run(spark: Any, table: str, checkpoint: Path, **options: Any) -> list[tuple[str, int, str]]:
    """One AvailableNow run of the changes of `table` into a Parquet sink (exactly once across restarts); what the
    sink holds after it, from every run on this checkpoint."""
    rows, _ = _run_query(spark, table, checkpoint, **options)
    return [(r["_row_kind"], r["id"], r["v"]) for r in rows]


def _nolog_table(warehouse: Path, name: str, schema: pa.Schema) -> tablestore.Table:
    """A new primary-key table `db.<name>` (key `id`, 2 buckets) without a log in the session's warehouse."""
    cat = tablestore.Catalog(str(warehouse))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.{name}", schema, primary_key=["id"], options={"bucket": "2"})


def _run_query(spark: Any, table: str, checkpoint: Path, **options: Any) -> tuple[list[Any], dict[str, int]]:
    """`_run`'s rows, whole, and the source's metrics summed over the run's micro-batches."""
    out = checkpoint.parent / (checkpoint.name + "-out")
    df = tablestore.spark.read_changes(spark, table, **options)
    query = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert query.exception() is None
    metrics = {k: int(v) for k, v in (query.lastProgress["sources"][0].get("metrics") or {}).items()}
    return spark.read.parquet(str(out)).collect(), metrics


def test_a_table_without_a_log_streams_its_snapshots_as_a_changelog(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    t = _nolog_table(spark_warehouse, "nolog", SCHEMA)
    t.write(pa.Table.from_pylist([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], schema=SCHEMA))
    ck = tmp_path / "ck"
    assert sorted(_run(spark, t.name, ck)) == [("+I", 1, "a"), ("+I", 2, "b")]
    t.write(pa.Table.from_pylist([{"_row_kind": "+U", "id": 1, "v": "a2"}, {"_row_kind": "-D", "id": 2, "v": "b"},
                                  {"_row_kind": "+I", "id": 3, "v": "c"}]))
    first = [("+I", 1, "a"), ("+I", 2, "b")]
    changes = [("+I", 3, "c"), ("+U", 1, "a2"), ("-D", 2, "b"), ("-U", 1, "a")]
    assert sorted(_run(spark, t.name, ck)) == sorted(first + changes)
    assert sorted(_run(spark, t.name, ck)) == sorted(first + changes)  # resumed at the end: nothing twice


TYPED = pa.schema([pa.field("id", pa.int64(), False), ("flag", pa.bool_()), ("small", pa.int32()),
                   ("price", pa.decimal128(10, 2)), ("at", pa.timestamp("us", "UTC")), ("day", pa.date32()),
                   ("raw", pa.binary()), ("f", pa.float64()), ("v", pa.string())])


def test_a_table_without_a_log_has_its_snapshot_batches_computed_by_the_catalog_service(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    """After the base (read by Python's reader), each snapshot's batch is computed by the catalog service and read
    by the JVM from Arrow: the same rows, every type as the table holds it."""
    import datetime
    import decimal

    t = _nolog_table(spark_warehouse, "typed_nolog", TYPED)
    at = datetime.datetime(2026, 11, 29, 1, 2, 3, 456789, tzinfo=datetime.timezone.utc)
    first = {"id": 1, "flag": True, "small": -7, "price": decimal.Decimal("12.34"), "at": at,
             "day": datetime.date(2026, 11, 29), "raw": b"\x00\xff", "f": 1.5, "v": "a"}
    t.write(pa.Table.from_pylist([first, {"id": 2, **{k: None for k in TYPED.names[1:]}}], schema=TYPED))
    ck = tmp_path / "ck"
    rows, metrics = _run_query(spark, t.name, ck)
    assert sorted(r["id"] for r in rows) == [1, 2]
    second = {**first, "id": 3, "price": decimal.Decimal("-0.01"), "v": "\u00e9t\u00e9", "f": float("inf")}
    changes = pa.Table.from_pylist([{**first, "v": "a2"}, second], schema=TYPED)
    t.write(changes.add_column(0, "_row_kind", pa.array(["+U", "+I"])))
    t.write(pa.Table.from_pylist([{"id": 2, **{k: None for k in TYPED.names[1:]}}], schema=TYPED)
            .add_column(0, "_row_kind", pa.array(["-D"])))
    rows, metrics = _run_query(spark, t.name, ck)
    assert metrics.get("batchesComputedByService", 0) >= 1 and metrics.get("batchesReadByPython") == 0
    got = sorted(((r["_row_kind"], r["id"]), {k: r[k] for k in TYPED.names}) for r in rows)
    expected = sorted([(("+I", 1), first), (("+I", 2), {"id": 2, **{k: None for k in TYPED.names[1:]}}),
                       (("-U", 1), first), (("+U", 1), {**first, "v": "a2"}), (("+I", 3), second),
                       (("-D", 2), {"id": 2, **{k: None for k in TYPED.names[1:]}})], key=lambda x: x[0])
    assert [k for k, _ in got] == [k for k, _ in expected]
    for (kind, g), (_, e) in zip(got, expected):
        when = None if g["at"] is None else g["at"].astimezone(datetime.timezone.utc)  # Spark: the local time
        assert {**g, "raw": None if g["raw"] is None else bytes(g["raw"]), "at": when} == e, kind


def test_a_micro_batch_too_large_for_its_task_is_read_by_pythons_reader(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    """The service's batch travels inside its task: one of more than 16 MiB of Arrow goes to Python's reader."""
    t = _nolog_table(spark_warehouse, "wide_nolog", SCHEMA)
    t.write(pa.Table.from_pylist([{"id": -1, "v": "first"}], schema=SCHEMA))
    ck = tmp_path / "ck"
    assert _run(spark, t.name, ck) == [("+I", -1, "first")]
    n = 9_000
    wide = [f"{i:08d}" + "x" * 2_000 for i in range(n)]   # about 18 MiB of Arrow
    t.write(pa.table({"id": pa.array(range(n), pa.int64()), "v": pa.array(wide)}))
    rows, metrics = _run_query(spark, t.name, ck)
    assert metrics == {"batchesComputedByService": 0, "batchesReadByPython": 1}
    assert sorted(r["id"] for r in rows) == [-1, *range(n)]


def test_a_table_without_a_log_streams_its_records_as_written_when_not_normalized(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    t = _nolog_table(spark_warehouse, "stored_nolog", SCHEMA)
    t.write(pa.Table.from_pylist([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], schema=SCHEMA))
    ck, stored = tmp_path / "ck", {"changelog.normalize": "false"}
    assert sorted(_run(spark, t.name, ck, **stored)) == [("+I", 1, "a"), ("+I", 2, "b")]
    t.write(pa.Table.from_pylist([{"_row_kind": "+U", "id": 1, "v": "a2"}, {"_row_kind": "-D", "id": 2, "v": "b"}]))
    t.compact(full=True)
    rows, metrics = _run_query(spark, t.name, ck, **stored)
    assert metrics.get("batchesComputedByService", 0) >= 1
    # no -U: an update is +I (files keep no +U), a delete its -D record; the compaction adds nothing
    assert sorted((r["_row_kind"], r["id"], r["v"]) for r in rows) == [
        ("+I", 1, "a"), ("+I", 1, "a2"), ("+I", 2, "b"), ("-D", 2, "b")]


def test_a_compaction_makes_no_micro_batch_of_its_own(spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    """A stream whose only new snapshots are compactions runs no batch (its foreachBatch function is not called);
    the compaction is read, as nothing, with the next change's batch."""
    t = _nolog_table(spark_warehouse, "compacted_nolog", SCHEMA)
    t.write(pa.Table.from_pylist([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], schema=SCHEMA))
    t.write(pa.Table.from_pylist([{"id": 1, "v": "a2"}, {"id": 3, "v": "c"}], schema=SCHEMA))
    calls: list[tuple[int, list[tuple[str, int, str]]]] = []

    def sink(df: Any, batch_id: int) -> None:
        calls.append((batch_id, sorted((r["_row_kind"], r["id"], r["v"]) for r in df.collect())))

    def run() -> list[tuple[int, list[tuple[str, int, str]]]]:
        before = len(calls)
        query = (tablestore.spark.read_changes(spark, t.name, scan="latest").writeStream.foreachBatch(sink)
                 .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True).start())
        query.awaitTermination(240)
        assert query.exception() is None
        return calls[before:]

    assert run() == [(0, [])]   # Spark runs a new query's first batch (from where it starts), rows or not
    compacted = t.compact(full=True)
    assert compacted is not None and t.snapshots()[-1].kind == "COMPACT"
    assert run() == []   # before: one batch of no rows
    t.write(pa.Table.from_pylist([{"_row_kind": "-D", "id": 2, "v": "b"}]))
    assert t.compact(full=True) is not None
    assert run() == [(1, [("-D", 2, "b")])]   # the write's batch; the compaction after it makes none


@pytest.mark.kafka
def test_a_table_with_a_log_streams_the_snapshot_then_the_log(
        spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    warehouse = tmp_path / "wh"
    cat = tablestore.Catalog(str(warehouse), options={BOOTSTRAP: kafka_bootstrap})
    cat.create_database("db")
    t = cat.create_table("db.logged", SCHEMA, primary_key=["id"],
                         options={"bucket": "2", "log.changelog-mode": "all"})
    try:
        t.write(pa.Table.from_pylist([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], schema=SCHEMA))
        opts = {"warehouse": str(warehouse), BOOTSTRAP: kafka_bootstrap}
        ck = tmp_path / "ck"
        assert sorted(_run(spark, t.name, ck, **opts)) == [("+I", 1, "a"), ("+I", 2, "b")]
        t.write(pa.Table.from_pylist([{"id": 3, "v": "c"}, {"id": 4, "v": "d"}, {"id": 5, "v": "e"}], schema=SCHEMA))
        rows, metrics = _run_query(spark, t.name, ck, **{"max-rows-per-trigger": "1"}, **opts)
        assert metrics.get("batchesComputedByService") == 0   # a log: its ranges are read by Python's reader
        got = [(r["_row_kind"], r["id"], r["v"]) for r in rows]
        every = [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c"), ("+I", 4, "d"), ("+I", 5, "e")]
        assert sorted(got) == every  # the new ones once each
        files = list((tmp_path / "ck-out").glob("part-*.parquet"))
        # the base in one batch, then one row per trigger (PySpark 4.1 has no admission control: all at once)
        assert len(files) >= (4 if ADMISSION_CONTROL else 2)
        assert sorted(_run(spark, t.name, ck, **opts)) == every
    finally:
        cat.drop_table("db.logged")


def test_read_stream_without_a_schema_gives_the_changelog_and_batch_reads_keep_the_table_schema(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    t = _nolog_table(spark_warehouse, "plain_stream", SCHEMA)
    t.write(pa.Table.from_pylist([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], schema=SCHEMA))
    changes = spark.readStream.format("managed").option("scan", "latest").load(t.name)
    assert changes.isStreaming and changes.columns == ["_row_kind", "id", "v"]
    assert not changes.schema["_row_kind"].nullable
    assert spark.read.format("managed").load(t.name).columns == ["id", "v"]   # same options, batch: the table's
    full = spark.readStream.format("managed").load(t.name)
    query = full.writeStream.format("memory").queryName("plain_stream").trigger(availableNow=True).start()
    query.awaitTermination(240)
    assert query.exception() is None
    assert sorted(tuple(r) for r in spark.sql("SELECT * FROM plain_stream").collect()) == [("+I", 1, "a"),
                                                                                          ("+I", 2, "b")]


def test_a_stream_reader_given_the_batch_schema_says_how_to_get_the_changelog(spark_warehouse: Path) -> None:
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    from tablestore.spark.datasource import DataSourceOptionError
    from tablestore.spark.stream_read import ManagedStreamReader

    schema = StructType([StructField("id", LongType(), False), StructField("v", StringType())])
    with pytest.raises(DataSourceOptionError, match="jar_path.*read_changes"):
        ManagedStreamReader({"path": "db.any", "warehouse": str(spark_warehouse)}, schema)
