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
    out = checkpoint.parent / (checkpoint.name + "-out")
    df = tablestore.spark.read_changes(spark, table, **options)
    query = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert query.exception() is None
    return [(r["_row_kind"], r["id"], r["v"]) for r in spark.read.parquet(str(out)).collect()]


def test_a_table_without_a_log_streams_its_snapshots_as_a_changelog(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(spark_warehouse))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.nolog", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.Table.from_pylist([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], schema=SCHEMA))
    ck = tmp_path / "ck"
    assert sorted(_run(spark, t.name, ck)) == [("+I", 1, "a"), ("+I", 2, "b")]
    t.write(pa.Table.from_pylist([{"_row_kind": "+U", "id": 1, "v": "a2"}, {"_row_kind": "-D", "id": 2, "v": "b"},
                                  {"_row_kind": "+I", "id": 3, "v": "c"}]))
    first = [("+I", 1, "a"), ("+I", 2, "b")]
    changes = [("+I", 3, "c"), ("+U", 1, "a2"), ("-D", 2, "b"), ("-U", 1, "a")]
    assert sorted(_run(spark, t.name, ck)) == sorted(first + changes)
    assert sorted(_run(spark, t.name, ck)) == sorted(first + changes)  # resumed at the end: nothing twice


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
        got = _run(spark, t.name, ck, **{"max-rows-per-trigger": "1"}, **opts)
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
    cat = tablestore.Catalog(str(spark_warehouse))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.plain_stream", SCHEMA, primary_key=["id"], options={"bucket": "2"})
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
