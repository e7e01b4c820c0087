"""The write session: one owner of the commit user, identifiers and committer; compaction as the last step of its
commit (for `write()` and `log_writer()` alike), bounded by `num-sorted-run.stop-trigger`; the live files of a
snapshot read once and passed down; row kinds checked once, by logstore's rules."""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import catalog
import filestore
import tablestore
from filestore import FileIO

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def new_table(tmp_path: Path, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"bucket": "2", **options})


def rows(ids: range | list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(list(ids), pa.int64()), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def max_runs(tmp_path: Path) -> int:
    """The most sorted runs any bucket has at the latest snapshot."""
    store = catalog.Catalog(str(tmp_path / "wh")).get_table("db.t").store
    counts = filestore.sorted_run_counts(store.live_files(store.snapshots.latest()))
    return max(counts.values(), default=0)


# -- compaction is a step of every session's commit, bounded by the stop trigger ---------------------------------

@pytest.mark.parametrize("path", ["write", "log_writer"])
def test_runs_per_bucket_never_exceed_the_stop_trigger(tmp_path: Path, path: str) -> None:
    # the compaction trigger alone would let 6 runs pile up; the stop trigger holds every bucket at 2
    t = new_table(tmp_path, **{"num-sorted-run.compaction-trigger": "6", "num-sorted-run.stop-trigger": "2",
                               "compaction.max-size-amplification-percent": "100000",
                               "compaction.size-ratio": "0"})
    session = t.log_writer() if path == "log_writer" else None
    for i in range(12):
        data = rows(range(i * 10, i * 10 + 10))
        if session is not None:
            session.write(data)
            session.commit()
        else:
            t.write(data)
        assert max_runs(tmp_path) <= 2, i
    if session is not None:
        session.close()
    assert t.read().num_rows == 120
    kinds = Counter(s.kind for s in t.snapshots())
    assert kinds["APPEND"] == 12 and kinds["COMPACT"] >= 5


def test_checkpointed_sessions_compact_like_write(tmp_path: Path) -> None:
    """Several `log_writer()` sessions, several checkpoints each: the runs stay at the compaction trigger."""
    t = new_table(tmp_path, **{"num-sorted-run.compaction-trigger": "3"})
    for s in range(4):
        with t.log_writer() as w:
            for c in range(5):
                w.write(rows(range(s * 100 + c * 10, s * 100 + c * 10 + 10)))
                w.commit()
                assert max_runs(tmp_path) <= 3, (s, c)
    assert t.read().num_rows == 200
    assert any(info.kind == "COMPACT" for info in t.snapshots())


def test_write_only_disables_compaction_in_every_session(tmp_path: Path) -> None:
    t = new_table(tmp_path, **{"write-only": "true", "num-sorted-run.stop-trigger": "2"})
    for i in range(4):
        t.write(rows(range(i, i + 1)))
    with t.log_writer() as w:
        for i in range(4, 8):
            w.write(rows(range(i, i + 1)))
            w.commit()
    assert {s.kind for s in t.snapshots()} == {"APPEND"}
    assert max_runs(tmp_path) > 2


def test_the_stop_trigger_defaults_to_compaction_trigger_plus_3_and_is_range_checked(tmp_path: Path) -> None:
    store = catalog.Catalog(str(tmp_path / "wh"))
    t = new_table(tmp_path, **{"num-sorted-run.compaction-trigger": "4"})
    assert store.get_table("db.t").store.options.stop_trigger == 7
    assert t.options["num-sorted-run.compaction-trigger"] == "4"
    with pytest.raises(catalog.InvalidOptionError, match="num-sorted-run.stop-trigger"):
        store.create_table("db.bad", schema=SCHEMA, primary_key=["id"],
                           options={"num-sorted-run.stop-trigger": "0"}).write(rows([1]))


def test_compaction_shares_the_identifier_of_its_commit_and_a_retry_stays_a_no_op(tmp_path: Path) -> None:
    t = new_table(tmp_path, **{"num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "2"})
    w = t.log_writer()
    for ident in (1, 2, 3):
        w.write(rows([ident]))
        sid = w.commit(ident)
        assert sid is not None
        assert w.commit(ident) is None  # nothing new written: nothing committed
    infos = t.snapshots()
    assert [s.commit_identifier for s in infos if s.kind == "COMPACT"]  # compactions happened...
    assert {s.commit_user for s in infos} == {w.commit_user}  # ... as the session's one commit user
    appends = {s.commit_identifier: s.id for s in infos if s.kind == "APPEND"}
    assert appends.keys() == {1, 2, 3}
    # a recovered job re-committing checkpoint 2 finds its APPEND snapshot, not the COMPACT one after it
    again = tablestore.Catalog(str(tmp_path / "wh")).get_table("db.t")
    from tablestore.writer import TableWriter
    resumed = TableWriter(again._write_target(), commit_user=w.commit_user)
    resumed.write(rows([2]))
    assert resumed.commit(2) == appends[2]
    w.close()
    resumed.close()


# -- the live files of a snapshot are read once -------------------------------------------------------------------

class CountingReads:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: Counter[str] = Counter()
        original = FileIO.read_bytes

        def read_bytes(io: FileIO, path: str) -> bytes:
            if "/manifest/" in path:
                self.paths[path] += 1
            return original(io, path)

        monkeypatch.setattr(FileIO, "read_bytes", read_bytes)

    def take(self) -> Counter[str]:
        out, self.paths = self.paths, Counter()
        return out


def test_one_write_reads_its_base_snapshots_manifests_once(tmp_path: Path, monkeypatch: Any) -> None:
    t = new_table(tmp_path, **{"num-sorted-run.compaction-trigger": "2"})
    for i in range(3):
        t.write(rows(range(i * 5, i * 5 + 5)))
    reads = CountingReads(monkeypatch)

    fresh = tablestore.Catalog(str(tmp_path / "wh")).get_table("db.t")  # knows nothing yet
    fresh.write(rows(range(100, 110)))  # a write, its commit and its compaction (2 snapshots)
    first = reads.take()
    assert first and max(first.values()) == 1, first  # the base snapshot's manifests, each read once
    for i in range(5):  # the session knows the live files of every snapshot it made: no manifest is read
        fresh.write(rows(range(200 + i, 201 + i)))
        assert reads.take() == Counter(), i

    t.write(rows([999]))  # another writer moves the table on
    reads.take()
    fresh.write(rows([1000]))
    moved = reads.take()
    assert moved and max(moved.values()) == 1, moved  # the new base, once
    assert fresh.read().num_rows == 15 + 10 + 5 + 2


def test_a_checkpointed_session_reads_no_manifest_after_its_first_commit(tmp_path: Path, monkeypatch: Any) -> None:
    t = new_table(tmp_path, **{"num-sorted-run.compaction-trigger": "2"})
    t.write(rows(range(5)))
    reads = CountingReads(monkeypatch)
    with t.log_writer() as w:
        w.write(rows(range(5, 10)))
        w.commit()
        assert max(reads.take().values()) == 1
        for i in range(4):
            w.write(rows(range(10 + i, 11 + i)))
            w.commit()
            assert reads.take() == Counter()


# -- row kinds: one owner, clear errors ----------------------------------------------------------------------------

def test_a_non_string_row_kind_column_is_a_typed_error_naming_the_table_and_type(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    with pytest.raises(tablestore.InvalidRowKindError, match=r"'db\.t'.*_row_kind.*int64"):
        t.write(pa.table({"_row_kind": [1, 2], "id": [1, 2], "v": ["a", "b"]}))
    assert t.snapshots() == []


def test_an_all_null_row_kind_column_names_the_values_and_count(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    with pytest.raises(tablestore.InvalidRowKindError, match=r"'db\.t'.*2 of 2 rows.*\[None\]") as info:
        t.write(pa.table({"_row_kind": pa.array([None, None], pa.string()), "id": [1, 2], "v": ["a", "b"]}))
    assert info.value.count == 2
    with pytest.raises(tablestore.InvalidRowKindError, match=r"null in all 3 rows"):
        t.write(pa.table({"_row_kind": pa.nulls(3), "id": [1, 2, 3], "v": ["a", "b", "c"]}))
    assert t.snapshots() == []


def test_bad_row_kinds_are_counted_and_a_log_store_error_too(tmp_path: Path) -> None:
    import logstore

    t = new_table(tmp_path)
    with pytest.raises(logstore.InvalidRowKindError, match=r"3 of 4 rows .*\['\+X', 'x'\]"):
        t.write(pa.table({"_row_kind": ["+X", "+I", "x", "x"], "id": [1, 2, 3, 4], "v": list("abcd")}))


def test_an_empty_write_commits_nothing_and_returns_none(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    assert t.write(rows([])) is None
    assert t.write(rows([1])) == 1
    assert t.write(rows([])) is None
    assert [s.id for s in t.snapshots()] == [1]


def test_the_writer_takes_values_not_its_table(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    w = t.log_writer()
    assert not hasattr(w, "table")
    assert (w.target.name, w.target.store, w.target.log) == ("db.t", t._store, None)
    w.close()


def test_one_commit_of_many_runs_is_compacted_down_to_the_stop_trigger(tmp_path: Path) -> None:
    """A big write flushes many runs into a bucket in one commit: the write waits until it is at the stop
    trigger again, even when the compaction trigger is higher."""
    t = new_table(tmp_path, **{"bucket": "1", "write-buffer-size": "2 kb", "num-sorted-run.compaction-trigger": "8",
                               "num-sorted-run.stop-trigger": "3", "compaction.max-size-amplification-percent":
                               "100000", "compaction.size-ratio": "0"})
    with t.log_writer() as w:
        for i in range(10):  # ten flushes, ten runs
            w.write(rows(range(i * 200, i * 200 + 200)))
        w.commit()
    store = t._store
    appended = filestore.sorted_run_counts(store.live_files(store.snapshots.get(1)))
    assert max(appended.values()) > 8  # the APPEND snapshot had them all...
    assert max_runs(tmp_path) <= 3  # ... the write returned once compaction had brought them down
    assert t.read().num_rows == 2000
