"""The streaming sink's driver side without a Spark job (its tasks' commit messages made by hand): one snapshot per
(query, batch), a replayed batch recognised and its files deleted, an aborted batch's files deleted."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.spark.stream_write import ManagedStreamWriter, StreamTaskCommit
from tablestore.spark.types import spark_schema

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())])


def _task(t: tablestore.Table, rows: list[dict[str, Any]], query: str, batch: int) -> StreamTaskCommit:
    store = t._handle.store
    writer = store.new_write(store.live_files(store.snapshots.latest()))
    writer.write(writer.conform(pa.Table.from_pylist(rows, schema=SCHEMA)), None, conformed=True)
    return StreamTaskCommit(0, tuple(writer.prepare_commit()), query, batch)


def _data_files(t: tablestore.Table) -> set[str]:
    return {p.name for p in Path(t.path).rglob("data-*")}


def test_batches_commit_once_and_aborted_batches_leave_no_files(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1", "write-only": "true"})
    options = {"path": "db.t", "warehouse": str(tmp_path / "wh")}
    sink = ManagedStreamWriter(options, spark_schema(SCHEMA), False)
    sink.commit([_task(t, [{"id": 1, "v": "a"}], "q1", 0)], 0)
    sink.commit([_task(t, [{"id": 2, "v": "b"}], "q1", 1)], 1)
    files = _data_files(t)
    assert len(t.snapshots()) == 2
    replay = _task(t, [{"id": 2, "v": "b"}], "q1", 1)
    sink.commit([replay, None], 1)  # Spark replays batch 1 after a restart
    assert len(t.snapshots()) == 2 and _data_files(t) == files
    aborted = _task(t, [{"id": 3, "v": "c"}], "q1", 2)
    assert _data_files(t) > files
    sink.abort([aborted], 2)
    assert _data_files(t) == files
    sink.abort([_task(t, [{"id": 2, "v": "b"}], "q1", 1)], 1)  # batch 1 is in: abort keeps the table's files
    assert sorted(r["id"] for r in t.read().to_pylist()) == [1, 2]
    sink.commit([_task(t, [{"id": 3, "v": "c"}], "q2", 0)], 0)  # another query (checkpoint): a new commit
    assert sorted(r["id"] for r in t.read().to_pylist()) == [1, 2, 3]
    assert [s.commit_user for s in t.snapshots()] == ["spark-stream-q1"] * 2 + ["spark-stream-q2"]
