"""The catalog service's half of a log-less table's streaming read (`stream_changes`,
tablestore.spark.stream_read.changes_in_service): a micro-batch's changes written as Arrow IPC for the JVM's stream,
without Spark; the JVM's half is tested through Spark (test_spark_stream_read.py)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore.spark import stream_read
from tablestore.spark.catalog_service import CATALOG_ACTIONS
from tablestore.spark.source_options import table_ref
from tablestore.spark.types import spark_schema

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string()), ("at", pa.timestamp("us", "UTC"))])


def _table(tmp_path: Path) -> tuple[tablestore.Table, dict[str, str]]:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.Table.from_pylist([{"id": 1, "v": "a", "at": None}, {"id": 2, "v": "b", "at": None}], schema=SCHEMA))
    changes = pa.Table.from_pylist([{"id": 1, "v": "a2", "at": None}, {"id": 2, "v": "b", "at": None},
                                    {"id": 3, "v": "c", "at": 1_700_000_000_000_000}], schema=SCHEMA)
    t.write(changes.add_column(0, "_row_kind", pa.array(["+U", "-D", "+I"])))
    t.compact(full=True)
    return t, {"path": "db.t", "warehouse": str(tmp_path / "wh")}


def _args(options: dict[str, str], start: int, end: int, path: Path) -> dict[str, object]:
    schema = spark_schema(stream_read.changes_schema(table_ref(options))).json()
    return {"options": options, "start": start, "end": end, "schema": schema, "path": str(path)}


def test_the_service_writes_the_changes_of_the_batchs_snapshots(tmp_path: Path) -> None:
    t, options = _table(tmp_path)
    assert [s.id for s in t.snapshots()] == [1, 2, 3]   # write, write, compaction
    out = tmp_path / "batch.arrow"
    assert CATALOG_ACTIONS["stream_changes"](_args(options, 1, 3, out)) == {"rows": 4}
    rows = pa.ipc.open_file(str(out)).read_all()
    assert rows.schema.names == ["_row_kind", "id", "v", "at"]
    assert sorted((r["_row_kind"], r["id"], r["v"]) for r in rows.to_pylist()) == [
        ("+I", 3, "c"), ("+U", 1, "a2"), ("-D", 2, "b"), ("-U", 1, "a")]
    assert [r["at"] for r in rows.to_pylist() if r["id"] == 3][0].timestamp() == 1_700_000_000
    # the first snapshot from the empty table; the compaction alone: an empty batch
    assert CATALOG_ACTIONS["stream_changes"](_args(options, 0, 1, out)) == {"rows": 2}
    assert CATALOG_ACTIONS["stream_changes"](_args(options, 2, 3, out)) == {"rows": 0}
    assert pa.ipc.open_file(str(out)).read_all().num_rows == 0


def test_a_batch_above_the_record_limit_is_left_to_the_python_reader(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, options = _table(tmp_path)
    monkeypatch.setattr(stream_read, "CHANGES_IN_SERVICE_RECORDS", 2)
    out = tmp_path / "batch.arrow"
    assert CATALOG_ACTIONS["stream_changes"](_args(options, 1, 2, out)) is None   # 3 records
    assert CATALOG_ACTIONS["stream_changes"](_args(options, 0, 1, out)) == {"rows": 2}   # 2 records
    assert CATALOG_ACTIONS["stream_changes"](_args(options, 2, 3, out)) == {"rows": 0}   # a compaction: none


def test_normalize_false_gives_the_records_as_written_without_reading_the_rows_before(tmp_path: Path) -> None:
    t, options = _table(tmp_path)
    out = tmp_path / "batch.arrow"
    stored = {**options, "changelog.normalize": "false"}
    assert CATALOG_ACTIONS["stream_changes"](_args(stored, 1, 3, out)) == {"rows": 3}
    rows = pa.ipc.open_file(str(out)).read_all().to_pylist()
    # files keep no +U: an update is +I; a delete is the -D record as written; the compaction wrote nothing new
    assert sorted((r["_row_kind"], r["id"], r["v"]) for r in rows) == [("+I", 1, "a2"), ("+I", 3, "c"), ("-D", 2, "b")]
