"""Consumers in Spark: a stream with `consumer-id` records its progress at each micro-batch commit and a new query
(no checkpointed offsets) resumes there; `` db.`t$consumers` `` shows it; `CALL managed.sys.reset_consumer` (and
`system.`) moves or deletes it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest

import tablestore

pytestmark = [pytest.mark.spark, pytest.mark.skipif(
    tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 2),
    reason="PySpark 4.1 runs an AvailableNow query through a wrapper that never tells the source its last batch "
           "is done: not recorded there (docs/stream.md, consumer-id)")]

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def _stream(spark: Any, table: str, checkpoint: Path, consumer: str) -> list[tuple[str, int, str]]:
    """One AvailableNow run of `spark.readStream.format("managed").option("consumer-id", consumer)` on a fresh
    checkpoint: the changes it read."""
    import tablestore.spark

    out = checkpoint.parent / (checkpoint.name + "-out")
    df = tablestore.spark.read_changes(spark, table, **{"consumer-id": consumer})
    query = (df.writeStream.format("parquet").option("path", str(out)).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination(240)
    assert query.exception() is None
    return sorted((r["_row_kind"], r["id"], r["v"]) for r in spark.read.parquet(str(out)).collect())


def test_a_stream_with_a_consumer_id_resumes_and_sql_shows_and_resets_it(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    db = f"consumerdb_{int(time.time() * 1000) % 100000}"
    cat = tablestore.Catalog(str(spark_warehouse))
    cat.create_database(db)
    try:
        t = cat.create_table(f"{db}.t", SCHEMA, primary_key=["id"], options={"bucket": "2", "log.system": "none"})
        t.write(pa.Table.from_pylist([{"id": 1, "v": "a"}, {"id": 2, "v": "b"}], schema=SCHEMA))
        assert _stream(spark, t.name, tmp_path / "ck1", "job") == [("+I", 1, "a"), ("+I", 2, "b")]
        assert rows(spark, f"SELECT consumer_id, next_snapshot_id, expired FROM managed.{db}.`t$consumers`") == [
            ("job", 2, False)]

        t.write(pa.Table.from_pylist([{"id": 3, "v": "c"}], schema=SCHEMA))
        assert _stream(spark, t.name, tmp_path / "ck2", "job") == [("+I", 3, "c")]   # a new checkpoint: resumed
        assert [c.next_snapshot_id for c in t.consumers()] == [3]

        assert rows(spark, f"CALL managed.sys.reset_consumer(table => '{db}.t', consumer_id => 'job', "
                           "snapshot => 2)") == [("job", 2, False)]
        assert _stream(spark, t.name, tmp_path / "ck3", "job") == [("+I", 3, "c")]   # snapshot 2's changes again
        assert rows(spark, f"CALL managed.system.reset_consumer(table => '{db}.t', consumer_id => 'job')") == [
            ("job", None, True)]
        assert rows(spark, f"SELECT * FROM managed.{db}.`t$consumers`") == []
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS managed.{db} CASCADE")
