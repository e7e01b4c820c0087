"""Issue 11 item 6: a failed compaction (in the writer or on demand) and a failed log write clean up the data files
they wrote, as a lost commit race does; a commit that did land keeps its files."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

import catalog
import tablestore
from filestore import FileStoreCommit
from filestore.datafile import DataFileWriter
from tablestore.write_target import WriteTarget
from tablestore.writer import TableWriter

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def new_table(tmp_path: Path, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"bucket": "2", **options})


def rows(ids: range | list[int]) -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def files_on_disk_and_live(tmp_path: Path) -> tuple[set[str], set[str]]:
    handle = catalog.Catalog(str(tmp_path / "wh")).get_table("db.t")
    store = handle.store
    on_disk = {s.path.rsplit("/", 1)[-1] for s in store.io.walk_files(handle.path) if "/bucket-" in s.path}
    live = {e.file.file_name for e in store.live_entries(store.snapshots.latest()).values()}
    return on_disk, live


def fail_on_compaction_output(monkeypatch: pytest.MonkeyPatch, fail_at: int) -> None:
    """The `fail_at`-th compaction run written (level > 0) raises, after the earlier ones were written."""
    original = DataFileWriter.write_run
    calls = {"n": 0}

    def write_run(self: DataFileWriter, run: pa.Table, partition: Any, bucket: int, level: int) -> Any:
        if level > 0:
            calls["n"] += 1
            if calls["n"] == fail_at:
                raise OSError("disk full while compacting")
        return original(self, run, partition, bucket, level)

    monkeypatch.setattr(DataFileWriter, "write_run", write_run)


def test_a_compaction_failing_in_the_writer_deletes_what_it_wrote(tmp_path: Path, monkeypatch: Any) -> None:
    t = new_table(tmp_path, **{"num-sorted-run.compaction-trigger": "3", "compaction.size-ratio": "0"})
    for i in range(2):
        t.write(rows(range(i * 10, i * 10 + 10)))
    fail_on_compaction_output(monkeypatch, fail_at=2)  # bucket 0 compacted and written, bucket 1 fails
    with pytest.raises(tablestore.CompactionError, match=r"snapshot 3 was committed.*disk full") as info:
        t.write(rows(range(20, 30)))
    assert info.value.snapshot_id == 3 and isinstance(info.value.__cause__, OSError)
    on_disk, live = files_on_disk_and_live(tmp_path)
    assert on_disk == live  # the APPEND snapshot's files stay, the compaction's are gone
    assert t.read().num_rows == 30 and [s.kind for s in t.snapshots()] == ["APPEND"] * 3


def test_an_on_demand_compaction_whose_commit_fails_deletes_its_files(tmp_path: Path, monkeypatch: Any) -> None:
    t = new_table(tmp_path, **{"write-only": "true"})
    for i in range(3):
        t.write(rows(range(i * 10, i * 10 + 10)))

    def failing_publish(*args: object, **kwargs: object) -> object:
        raise OSError("snapshot directory unwritable")

    monkeypatch.setattr(FileStoreCommit, "publish", failing_publish)
    with pytest.raises(OSError, match="unwritable"):
        t.compact(full=True)
    monkeypatch.undo()
    on_disk, live = files_on_disk_and_live(tmp_path)
    assert on_disk == live and len(live) == 6
    assert t.compact(full=True) is not None and t.read().num_rows == 30


class _BrokenLogWriter:
    """A log writer whose flush at the checkpoint fails (an eventual-consistency producer losing the broker)."""

    def write(self, batch: pa.Table, buckets: np.ndarray) -> int:
        return batch.num_rows

    def prepare(self) -> dict[int, int]:
        raise OSError("broker went away while flushing")

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


class _BrokenLog:
    options = SimpleNamespace(changelog_mode="upsert", consistency="eventual")   # what a writer asks of a log

    def new_writer(self, transactional_id: str | None = None) -> _BrokenLogWriter:
        return _BrokenLogWriter()


def test_a_failed_log_write_deletes_the_data_files_of_its_commit(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    t.write(rows(range(5)))
    store = t._store
    w = TableWriter(WriteTarget("db.t", store, _BrokenLog()))  # type: ignore[arg-type]
    w.write(rows(range(100, 120)))
    with pytest.raises(OSError, match="broker went away"):
        w.commit()
    on_disk, live = files_on_disk_and_live(tmp_path)
    assert on_disk == live
    assert t.read().num_rows == 5 and len(t.snapshots()) == 1


def test_a_commit_that_landed_before_failing_keeps_its_files(tmp_path: Path, monkeypatch: Any) -> None:
    """The snapshot was published, then updating the LATEST hint failed: the files are the table's now."""
    from filestore.snapshot import SnapshotManager

    t = new_table(tmp_path, **{"write-only": "true"})
    original = SnapshotManager.try_publish

    def publish_then_fail(self: SnapshotManager, snapshot: Any) -> bool:
        assert original(self, snapshot)
        raise OSError("could not update the LATEST hint")

    monkeypatch.setattr(SnapshotManager, "try_publish", publish_then_fail)
    with pytest.raises(OSError, match="LATEST hint"):
        t.write(rows(range(10)))
    monkeypatch.undo()
    on_disk, live = files_on_disk_and_live(tmp_path)
    assert on_disk == live and live
    assert t.read().num_rows == 10
