"""The protocol of `CALL managed.system.compact` on the executors (tablestore/spark/compact_job.py), step by step
without Spark: the planning, the tasks and the commit, and what a concurrent compaction does to it. The whole job
through Spark: test_spark_sql_ops.py (local) and test_spark_cluster.py (a standalone cluster on S3)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from filestore import CommitConflictError
from tablestore.spark import compact_job
from tablestore.spark.source_options import TableRef

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.int64())])


def _table(tmp_path: Path) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    table = cat.create_table("db.t", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"],
                             options={"bucket": "2", "write-only": "true"})
    for i in range(3):
        table.write(pa.table({"id": list(range(i * 10, i * 10 + 20)), "dt": ["a"] * 10 + ["b"] * 10,
                              "v": [i] * 20}, schema=SCHEMA))
    return table


def _run_tasks(tmp_path: Path, partitions: str | None) -> list[list[Any]]:
    options = {"table": "db.t", "warehouse": str(tmp_path / "wh"),
               compact_job.READ_OPTION: json.dumps({"full": True, "partitions": partitions})}
    reader = compact_job.CompactReader(options)
    return [list(row) for task in reader.partitions() for row in reader.read(task)]


def _data_files(tmp_path: Path) -> set[str]:
    return {p.name for p in (tmp_path / "wh").rglob("*.parquet")}


def test_the_tasks_rewrite_each_bucket_and_one_commit_publishes_them(tmp_path: Path) -> None:
    table = _table(tmp_path)
    rows = table.read().sort_by([("id", "ascending"), ("dt", "ascending")])
    rows_of_tasks = _run_tasks(tmp_path, "dt=a")
    assert sorted(r[1] for r in rows_of_tasks) == [0, 1]   # one task per bucket of partition dt=a
    assert table.latest_snapshot_id() == 3   # the tasks commit nothing
    report = compact_job.commit(table, {"tasks": rows_of_tasks, "partitions": "dt=a", "full": True})
    assert report["snapshot_id"] == 4
    assert report["before"]["max_runs_per_bucket"] == 3 and report["after"]["max_runs_per_bucket"] == 1
    assert [s.kind for s in table.snapshots()][-1] == "COMPACT"
    assert table.read().sort_by([("id", "ascending"), ("dt", "ascending")]).equals(rows)
    compacted = {(str(f["partition"]), f["level"] != 0) for f in table.files()}
    assert compacted == {("{'dt': 'a'}", True), ("{'dt': 'b'}", False)}   # dt=b untouched


def test_nothing_to_compact_is_one_empty_task_and_no_snapshot(tmp_path: Path) -> None:
    table = _table(tmp_path)
    table.compact(full=True)
    rows_of_tasks = _run_tasks(tmp_path, None)
    assert rows_of_tasks == []
    assert compact_job.commit(table, {"tasks": rows_of_tasks})["snapshot_id"] is None
    assert table.latest_snapshot_id() == 4


def test_a_concurrent_compaction_of_the_same_files_fails_the_commit_and_its_files_go(tmp_path: Path) -> None:
    table = _table(tmp_path)
    rows = table.read().sort_by([("id", "ascending"), ("dt", "ascending")])
    rows_of_tasks = _run_tasks(tmp_path, None)
    table.compact(full=True)   # another compaction got there first
    written = {f.file_name for _s, _b, _f, text in rows_of_tasks for m in compact_job._decode(text) for f in m.added}
    assert written and written <= _data_files(tmp_path)   # on disk, in no snapshot
    assert not written & {f["file"] for f in table.files()}
    with pytest.raises(CommitConflictError, match="files already deleted by another commit"):
        compact_job.commit(table, {"tasks": rows_of_tasks})
    assert not written & _data_files(tmp_path)   # the tasks' files were deleted
    assert table.latest_snapshot_id() == 4
    assert table.read().sort_by([("id", "ascending"), ("dt", "ascending")]).equals(rows)


def test_the_table_ref_of_a_task_pickles_with_its_options(tmp_path: Path) -> None:
    """A task reaches an executor pickled: everything it needs is in its TableRef (warehouse, table, the catalog's
    options such as S3 endpoints)."""
    import pickle

    ref = TableRef(str(tmp_path), "db.t", (("s3.endpoint", "http://127.0.0.1:1"),))
    task = compact_job.BucketTask(ref, 7, ("a",), 1, True)
    assert pickle.loads(pickle.dumps(task)) == task
