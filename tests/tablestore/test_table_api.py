"""The Python API contract (`tablestore.Table`): inputs, changelogs, merge semantics, overwrite, time travel,
and the typed errors a user gets."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tablestore
from tablestore import (
    FileStoreError,
    InvalidRowKindError,
    InvalidWriteError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    TableStoreError,
)

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.string())])


def new_table(tmp_path: Path, *, pk: bool = True, partitioned: bool = True,
              options: dict[str, str] | None = None) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    key = (["id", "dt"] if partitioned else ["id"]) if pk else None
    return cat.create_table("db.t", schema=SCHEMA, primary_key=key, partition_by=["dt"] if partitioned else None,
                            options={"bucket": "2", **(options or {})})


def rows_of(t: tablestore.Table, **kwargs: Any) -> list[dict[str, Any]]:
    return sorted(t.read(**kwargs).to_pylist(), key=lambda r: (r["id"], r["dt"], str(r["v"])))


def changelog(*records: tuple[str, int, str, str | None]) -> pa.Table:
    return pa.table({"_row_kind": [r[0] for r in records], "id": [r[1] for r in records],
                     "dt": [r[2] for r in records], "v": [r[3] for r in records]})


# -- inputs ----------------------------------------------------------------------------------------------------
def test_accepts_arrow_tables_record_batches_and_pandas(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["table"]}, schema=SCHEMA))
    t.write(pa.record_batch({"id": [2], "dt": ["a"], "v": ["batch"]}, schema=SCHEMA))
    t.write(pd.DataFrame({"id": [3, 4], "dt": ["a", "b"], "v": ["frame", None]}))
    t.write(pd.DataFrame({"v": ["reordered"], "id": [5], "dt": ["b"]}))  # columns by name, any order
    assert rows_of(t) == [
        {"id": 1, "dt": "a", "v": "table"}, {"id": 2, "dt": "a", "v": "batch"}, {"id": 3, "dt": "a", "v": "frame"},
        {"id": 4, "dt": "b", "v": None}, {"id": 5, "dt": "b", "v": "reordered"},
    ]
    result = t.read()
    assert isinstance(result, pa.Table) and result.schema == SCHEMA


def test_write_returns_the_snapshot_id_and_empty_writes_commit_nothing(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"write-only": "true"})
    assert t.read().num_rows == 0 and t.read().schema == SCHEMA
    assert t.write(SCHEMA.empty_table()) is None
    assert t.snapshots() == []
    assert t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}, schema=SCHEMA)) == 1
    assert t.write(SCHEMA.empty_table()) is None  # nothing committed (not the previous snapshot's id)
    assert t.write(pa.table({"id": [2], "dt": ["a"], "v": ["y"]}, schema=SCHEMA)) == 2
    assert [s.id for s in t.snapshots()] == [1, 2]


def test_schema_mismatches_raise(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    bad_inputs = [
        pa.table({"id": [1], "v": ["x"]}),                                         # missing non-nullable column
        pa.table({"id": [1], "dt": ["a"], "v": ["x"], "extra": [1]}),              # unknown column
        pa.table({"id": ["not a number"], "dt": ["a"], "v": ["x"]}),               # uncastable type
    ]
    for data in bad_inputs:
        with pytest.raises(SchemaMismatchError, match="db.t"):
            t.write(data)
    with pytest.raises(SchemaMismatchError, match="nope"):
        t.read(columns=["id", "nope"])
    assert t.snapshots() == []
    assert issubclass(SchemaMismatchError, FileStoreError)
    t.write(pa.table({"id": [1], "dt": ["a"]}))   # a missing nullable column is null (e.g. an older writer)
    assert t.read().to_pylist() == [{"id": 1, "dt": "a", "v": None}]


def test_castable_types_are_accepted(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    t.write(pa.table({"id": pa.array([7], pa.int32()), "dt": pa.array(["a"], pa.large_string()), "v": ["x"]}))
    assert rows_of(t) == [{"id": 7, "dt": "a", "v": "x"}]


def test_null_primary_key_values_raise(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    with pytest.raises(InvalidWriteError, match="id"):
        t.write(pa.table({"id": [1, None], "dt": ["a", "a"], "v": ["x", "y"]}))
    assert t.snapshots() == [] and t.read().num_rows == 0


@pytest.mark.parametrize("kinds", [["+I", "+X"], ["+I", None], ["I", "+I"], ["-d", "+I"]])
def test_bad_row_kinds_raise_and_name_the_value(tmp_path: Path, kinds: list[str | None]) -> None:
    t = new_table(tmp_path)
    bad = next(k for k in kinds if k not in ("+I", "-U", "+U", "-D"))
    with pytest.raises(InvalidRowKindError) as info:
        t.write(pa.table({"_row_kind": kinds, "id": [1, 2], "dt": ["a", "a"], "v": ["x", "y"]}))
    assert str(bad) in str(info.value) and "db.t" in str(info.value)
    assert isinstance(info.value, TableStoreError)
    assert t.snapshots() == []


def test_empty_changelog_is_not_an_error(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"write-only": "true"})
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}, schema=SCHEMA))
    empty = pa.table({"_row_kind": pa.array([], pa.string()), "id": pa.array([], pa.int64()),
                      "dt": pa.array([], pa.string()), "v": pa.array([], pa.string())})
    assert t.write(empty) is None  # nothing committed
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "x"}]


# -- primary-key semantics -------------------------------------------------------------------------------------
def test_later_row_for_the_same_key_wins_within_and_across_writes(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"bucket": "3"})
    t.write(pa.table({"id": [1, 2, 1, 1, 3], "dt": ["a"] * 5, "v": ["1a", "2a", "1b", "1c", "3a"]}, schema=SCHEMA))
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "1c"}, {"id": 2, "dt": "a", "v": "2a"},
                          {"id": 3, "dt": "a", "v": "3a"}]
    t.write(pa.table({"id": [2, 3, 2], "dt": ["a"] * 3, "v": ["2b", "3b", "2c"]}, schema=SCHEMA))
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "1c"}, {"id": 2, "dt": "a", "v": "2c"},
                          {"id": 3, "dt": "a", "v": "3b"}]
    # the same id in another partition is another key
    t.write(pa.table({"id": [1], "dt": ["b"], "v": ["other"]}, schema=SCHEMA))
    assert len(rows_of(t)) == 4


def test_changelog_updates_and_deletes(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    t.write(changelog(("+I", 1, "a", "x"), ("+I", 2, "a", "y"), ("+I", 3, "a", "z")))
    t.write(changelog(("-U", 1, "a", "x"), ("+U", 1, "a", "x2"), ("-D", 2, "a", None), ("-D", 9, "a", None)))
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "x2"}, {"id": 3, "dt": "a", "v": "z"}]
    # delete then re-insert within one write: the later row wins
    t.write(changelog(("-D", 3, "a", None), ("+I", 3, "a", "back"), ("+I", 4, "a", "gone"), ("-D", 4, "a", None)))
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "x2"}, {"id": 3, "dt": "a", "v": "back"}]


def test_deleted_keys_stay_deleted_after_compaction(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"num-sorted-run.compaction-trigger": "2"})
    for i in range(4):
        t.write(changelog(("+I", 1, "a", f"v{i}"), ("+I", 2, "a", f"w{i}")))
    t.write(changelog(("-D", 2, "a", None)))
    t.compact(full=True)
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "v3"}]
    assert any(s.kind == "COMPACT" for s in t.snapshots())


# -- tables without a primary key ------------------------------------------------------------------------------
def test_without_primary_key_duplicates_are_kept_and_deletes_retract_one_copy(tmp_path: Path) -> None:
    t = new_table(tmp_path, pk=False, partitioned=False)
    row = ("+I", 1, "a", "x")
    t.write(changelog(row, row, row, ("+I", 2, "a", "y")))
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "x"}] * 3 + [{"id": 2, "dt": "a", "v": "y"}]
    t.write(changelog(("-D", 1, "a", "x"), ("-U", 2, "a", "y"), ("+U", 2, "a", "y2")))
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "x"}] * 2 + [{"id": 2, "dt": "a", "v": "y2"}]
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}, schema=SCHEMA))
    assert len(rows_of(t)) == 4
    # retracting more copies than exist leaves nothing (count <= 0 reads as no row), never a negative row
    t.write(changelog(*[("-D", 1, "a", "x")] * 5))
    assert rows_of(t) == [{"id": 2, "dt": "a", "v": "y2"}]
    # rows differing in any column, nulls included, are different rows
    t.write(changelog(("+I", 2, "a", None), ("+I", 2, "a", None)))
    assert rows_of(t) == [{"id": 2, "dt": "a", "v": None}] * 2 + [{"id": 2, "dt": "a", "v": "y2"}]


@pytest.mark.parametrize("compact_between", [False, True])
def test_without_primary_key_reads_do_not_depend_on_compaction(tmp_path: Path, compact_between: bool) -> None:
    t = new_table(tmp_path, pk=False, partitioned=False, options={"write-only": "true"})
    t.write(changelog(("+I", 5, "a", "x")))
    t.write(changelog(("-D", 1, "a", "x"), ("-D", 1, "a", "x")))  # retracts a row that is not there: no effect
    if compact_between:
        assert t.compact(full=True) is not None
    t.write(changelog(*[("+I", 1, "a", "x")] * 3))
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "x"}] * 3 + [{"id": 5, "dt": "a", "v": "x"}]


def test_projection(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    t.write(pa.table({"id": [1, 2], "dt": ["a", "b"], "v": ["x", "y"]}, schema=SCHEMA))
    got = t.read(columns=["v", "id"])
    assert got.schema.names == ["v", "id"]
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == [{"v": "x", "id": 1}, {"v": "y", "id": 2}]
    assert t.read(columns=["v"], filter=pc.field("dt") == "b").to_pylist() == [{"v": "y"}]


# -- overwrite -------------------------------------------------------------------------------------------------
def _seed_partitions(t: tablestore.Table) -> None:
    t.write(pa.table({"id": [1, 2, 3, 4], "dt": ["a", "a", "b", "c"], "v": ["a1", "a2", "b3", "c4"]}, schema=SCHEMA))


def test_overwrite_whole_table(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    _seed_partitions(t)
    sid = t.write(pa.table({"id": [9], "dt": ["z"], "v": ["new"]}, schema=SCHEMA), overwrite=True)
    assert rows_of(t) == [{"id": 9, "dt": "z", "v": "new"}]
    assert t.snapshots()[-1].kind == "OVERWRITE" and t.snapshots()[-1].id == sid
    assert len(rows_of(t, snapshot_id=1)) == 4


def test_overwrite_static_partition(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    _seed_partitions(t)
    t.write(pa.table({"id": [5], "dt": ["a"], "v": ["a5"]}, schema=SCHEMA), overwrite={"dt": "a"})
    assert rows_of(t) == [{"id": 3, "dt": "b", "v": "b3"}, {"id": 4, "dt": "c", "v": "c4"},
                          {"id": 5, "dt": "a", "v": "a5"}]
    # an empty static overwrite truncates the partition
    t.write(SCHEMA.empty_table(), overwrite={"dt": "b"})
    assert [r["dt"] for r in rows_of(t)] == ["c", "a"]


def test_static_overwrite_with_rows_outside_the_partition_raises(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    _seed_partitions(t)
    before = rows_of(t)
    with pytest.raises(InvalidWriteError, match="outside"):
        t.write(pa.table({"id": [5, 6], "dt": ["a", "b"], "v": ["x", "y"]}, schema=SCHEMA), overwrite={"dt": "a"})
    with pytest.raises(TableStoreError, match="not partition columns"):
        t.write(pa.table({"id": [5], "dt": ["a"], "v": ["x"]}, schema=SCHEMA), overwrite={"v": "a"})
    assert rows_of(t) == before and len(t.snapshots()) == 1


def test_overwrite_dynamic_partitions(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    _seed_partitions(t)
    t.write(pa.table({"id": [7, 8], "dt": ["b", "d"], "v": ["b7", "d8"]}, schema=SCHEMA), overwrite="dynamic")
    assert rows_of(t) == [{"id": 1, "dt": "a", "v": "a1"}, {"id": 2, "dt": "a", "v": "a2"},
                          {"id": 4, "dt": "c", "v": "c4"}, {"id": 7, "dt": "b", "v": "b7"},
                          {"id": 8, "dt": "d", "v": "d8"}]


def test_overwrite_typed_partition_values(tmp_path: Path) -> None:
    import datetime as dt

    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("day", pa.date32(), nullable=False),
                        pa.field("n", pa.int32(), nullable=False)])
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.typed", schema=schema, primary_key=["id", "day", "n"], partition_by=["day", "n"])
    d1, d2 = dt.date(2024, 1, 1), dt.date(2024, 1, 2)
    t.write(pa.table({"id": [1, 2, 3], "day": [d1, d1, d2], "n": [1, 2, 1]}, schema=schema))
    assert {p.name for p in Path(t.path).glob("day=*")} == {"day=2024-01-01", "day=2024-01-02"}
    t.write(pa.table({"id": [9], "day": [d1], "n": [1]}, schema=schema), overwrite={"day": d1})
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 3, "day": d2, "n": 1}, {"id": 9, "day": d1, "n": 1}
    ]
    t.write(pa.table({"id": [10], "day": [d2], "n": [1]}, schema=schema), overwrite={"day": "2024-01-02", "n": 1})
    assert sorted(r["id"] for r in t.read().to_pylist()) == [9, 10]
    assert t.read(filter=pc.field("day") == pa.scalar(d2, pa.date32())).column("id").to_pylist() == [10]


# -- time travel -----------------------------------------------------------------------------------------------
def test_time_travel_by_snapshot_id_and_timestamp(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"write-only": "true"})
    states = []
    for i in range(3):
        sid = t.write(pa.table({"id": [i, 0], "dt": ["a", "a"], "v": [f"n{i}", f"zero{i}"]}, schema=SCHEMA))
        states.append((sid, rows_of(t)))
        time.sleep(0.005)
    for sid, expected in states:
        assert rows_of(t, snapshot_id=sid) == expected
    for info, (sid, expected) in zip(t.snapshots(), states):
        assert info.id == sid
        assert rows_of(t, timestamp_ms=info.time_millis) == expected
        assert rows_of(t, timestamp_ms=info.time_millis + 1) == expected  # the latest snapshot at or before
    assert rows_of(t, timestamp_ms=int(time.time() * 1000) + 10_000) == states[-1][1]


def test_missing_snapshots_raise(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    with pytest.raises(SnapshotNotFoundError):
        t.read(snapshot_id=1)
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}, schema=SCHEMA))
    first = t.snapshots()[0].time_millis
    with pytest.raises(SnapshotNotFoundError, match="db.t"):
        t.read(snapshot_id=99)
    with pytest.raises(SnapshotNotFoundError, match="db.t"):
        t.read(timestamp_ms=first - 1)
    with pytest.raises(SnapshotNotFoundError):
        t.read(snapshot_id=1, timestamp_ms=first)


def test_snapshot_descriptions(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"write-only": "true"})
    t.write(pa.table({"id": [1, 2], "dt": ["a", "a"], "v": ["x", "y"]}, schema=SCHEMA))
    t.write(pa.table({"id": [3], "dt": ["a"], "v": ["z"]}, schema=SCHEMA), overwrite=True)
    first, second = t.snapshots()
    assert (first.id, first.kind, first.total_record_count, first.delta_record_count) == (1, "APPEND", 2, 2)
    assert (second.id, second.kind, second.total_record_count, second.delta_record_count) == (2, "OVERWRITE", 1, -1)
    assert first["id"] == 1 and first.to_dict()["kind"] == "APPEND"
    assert first.time.timestamp() * 1000 == pytest.approx(first.time_millis)
    assert first.time_millis <= second.time_millis <= time.time() * 1000


def test_another_session_sees_committed_data(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    reader = tablestore.Catalog(str(tmp_path)).get_table("db.t")
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}, schema=SCHEMA))
    assert reader.read().to_pylist() == [{"id": 1, "dt": "a", "v": "x"}]
    reader.write(pa.table({"id": [1], "dt": ["a"], "v": ["from reader"]}, schema=SCHEMA))
    assert t.read().to_pylist() == [{"id": 1, "dt": "a", "v": "from reader"}]


def test_a_new_handle_does_not_scan_history_for_its_first_commit(tmp_path: Path, monkeypatch: Any) -> None:
    """A freshly generated commit user cannot have committed before: no scan back through the snapshots."""
    from filestore.commit import FileStoreCommit

    t = new_table(tmp_path, options={"write-only": "true"})
    for i in range(5):
        t.write(pa.table({"id": pa.array([i], pa.int32()), "dt": ["a"], "v": ["x"]}))
    scanned: list[int] = []
    original = FileStoreCommit.find_committed
    monkeypatch.setattr(FileStoreCommit, "find_committed",
                        lambda self, ident: scanned.append(ident) or original(self, ident))
    fresh = tablestore.Catalog(str(tmp_path)).get_table("db.t")
    fresh.write(pa.table({"id": pa.array([9], pa.int32()), "dt": ["a"], "v": ["y"]}))
    assert scanned == []
    fresh.write(pa.table({"id": pa.array([10], pa.int32()), "dt": ["a"], "v": ["z"]}))
    assert scanned  # once it has committed, a retry must find its own snapshot: the check is back on
    assert sorted(r["id"] for r in fresh.read().to_pylist()) == [0, 1, 2, 3, 4, 9, 10]
