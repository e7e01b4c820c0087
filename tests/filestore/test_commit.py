"""The commit protocol (filestore.commit, filestore.snapshot): idempotence, optimistic retry under concurrent writers,
conflicts, atomic publish, and crash safety at every IO step (through the fault-injecting FileIO)."""
from __future__ import annotations

import dataclasses
import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import catalog
import tablestore
from faulty_io import Call, FaultPlan, FaultyFileIO, InjectedCrash
from filestore import CommitConflictError, CommitKind, CommitMessage, FileStore, Snapshot
from filestore.errors import CommitRetriesExhaustedError
from filestore.fileio import FileIO
from filestore.merge import merge
from tablestore.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                    ("v", pa.string())])


def make_table(
    warehouse: Path, *, pk: bool = True, options: dict[str, str] | None = None
) -> catalog.CatalogTable:
    """Write-only by default (no automatic compaction), so every write is exactly one snapshot."""
    cat = catalog.Catalog(str(warehouse))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(
        "db.t", SCHEMA, primary_key=["id", "p"] if pk else None, partition_by=["p"],
        options={"write-only": "true", **(options or {})},
    )


def load(warehouse: Path) -> catalog.CatalogTable:
    return catalog.Catalog(str(warehouse)).get_table("db.t")


def rows(warehouse: Path) -> list[dict[str, object]]:
    """What a fresh reader with a healthy file system sees."""
    return tablestore.Catalog(str(warehouse)).get_table("db.t").read().sort_by([("id", "ascending"), ("p", "ascending")]).to_pylist()


def data(ids: range | list[int], p: str = "a", v: str = "x") -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "p": [p] * len(ids), "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def prepare(store: FileStore, table: pa.Table) -> list[CommitMessage]:
    w = store.new_write()
    w.write(table)
    return w.prepare_commit()


def with_io(handle: catalog.CatalogTable, io: FileIO, **option_changes: Any) -> FileStore:
    options = dataclasses.replace(handle.store.options, **option_changes)
    return FileStore(io, handle.path, handle.schema, options, handle.identifier)


def snapshot_ids(handle: catalog.CatalogTable) -> list[int]:
    return [s.id for s in handle.store.snapshots.snapshots()]


def manifest_files(handle: catalog.CatalogTable) -> set[str]:
    return {s.path for s in handle.store.io.list_dir(handle.store.paths.manifest_dir)}


# -- idempotence -----------------------------------------------------------------------------------------------
def test_recommitting_same_user_and_identifier_is_a_noop(tmp_path: Path) -> None:
    handle = make_table(tmp_path, pk=False)  # without a primary key a double commit would show rows twice
    store = handle.store
    messages = prepare(store, data(range(3)))
    sid = store.new_commit("job-1").commit(messages, identifier=5)
    assert sid == 1
    assert store.new_commit("job-1").commit(messages, identifier=5) == sid
    assert snapshot_ids(handle) == [1]
    assert len(rows(tmp_path)) == 3

    # a later commit of the same user does not hide the earlier identifier
    sid6 = store.new_commit("job-1").commit(prepare(store, data([10])), identifier=6)
    assert sid6 == 2
    assert store.new_commit("job-1").commit(messages, identifier=5) == sid
    assert store.new_commit("job-1").commit(messages, identifier=6) == sid6
    assert snapshot_ids(handle) == [1, 2]
    assert len(rows(tmp_path)) == 4

    # the same identifier from another user is another commit
    assert store.new_commit("job-2").commit(prepare(store, data(range(3))), identifier=5) == 3
    assert len(rows(tmp_path)) == 7
    latest = store.snapshots.latest()
    assert latest is not None and (latest.commit_user, latest.commit_identifier) == ("job-2", 5)


def test_empty_commit_publishes_nothing(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    store = handle.store
    assert store.new_commit("u").commit([], identifier=1) is None
    assert snapshot_ids(handle) == []
    sid = store.new_commit("u").commit(prepare(store, data(range(2))), identifier=2)
    assert store.new_commit("u").commit(prepare(store, data([])), identifier=3) == sid
    assert snapshot_ids(handle) == [sid]


def test_log_offsets_only_commit_publishes_and_carries_offsets(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    store = handle.store
    s1 = store.new_commit("u").commit(prepare(store, data(range(2))), identifier=1, log_offsets={0: 10, 1: 4})
    s2 = store.new_commit("u").commit([], identifier=2, log_offsets={1: 9})
    assert s1 is not None and s2 == s1 + 1
    assert store.snapshots.get(s2).log_offsets == {0: 10, 1: 9}
    assert len(rows(tmp_path)) == 2


# -- atomic publish --------------------------------------------------------------------------------------------
def test_snapshot_is_published_with_an_exclusive_create(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    store = handle.store
    sid = store.new_commit("u").commit(prepare(store, data(range(2))), identifier=1)
    assert sid is not None
    path = store.paths.snapshot_file(sid)
    before = Path(path).read_bytes()
    existing = store.snapshots.get(sid)
    impostor = dataclasses.replace(existing, commit_user="impostor", total_record_count=999)
    assert store.snapshots.try_publish(impostor) is False
    assert Path(path).read_bytes() == before
    assert store.snapshots.get(sid).commit_user == "u"
    assert store.snapshots.try_publish(dataclasses.replace(existing, id=sid + 1)) is True
    assert store.snapshots.try_publish(dataclasses.replace(existing, id=sid + 1)) is False


@pytest.mark.parametrize("url_prefix", ["", "memory://"])
def test_exclusive_create_has_exactly_one_winner_among_threads(tmp_path: Path, url_prefix: str) -> None:
    root = f"memory://race-{tmp_path.name}" if url_prefix else str(tmp_path / "race")
    io, base = FileIO.from_url(root)
    path = f"{base}/snapshot/snapshot-1"
    start = threading.Barrier(8)
    results: dict[int, bool] = {}

    def race(i: int) -> None:
        payload = json.dumps({"writer": i, "pad": "x" * 100_000}).encode()
        start.wait()
        results[i] = io.create_exclusive(path, payload)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    winners = [i for i, won in results.items() if won]
    assert len(winners) == 1
    assert json.loads(io.read_bytes(path))["writer"] == winners[0]  # whole content of the winner, never mixed
    listed = [s.path.rsplit("/", 1)[-1] for s in io.list_dir(f"{base}/snapshot")]
    assert listed == ["snapshot-1"]  # no temp files left behind


# -- concurrent writers ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("write_only", ["true", "false"])
def test_concurrent_writers_all_succeed_and_every_row_is_present(tmp_path: Path, write_only: str) -> None:
    make_table(tmp_path, options={"bucket": "2", "write-only": write_only, "num-sorted-run.compaction-trigger": "2"})
    writers, commits_each, rows_each = 6, 3, 20
    start = threading.Barrier(writers)
    errors: list[BaseException] = []
    sids: list[int] = []
    lock = threading.Lock()

    def writer(w: int) -> None:
        try:
            t = tablestore.Catalog(str(tmp_path)).get_table("db.t")
            start.wait()
            for c in range(commits_each):
                base = (w * commits_each + c) * rows_each
                sid = t.write(data(range(base, base + rows_each), p=f"p{w % 2}"))
                with lock:
                    sids.append(sid)  # type: ignore[arg-type]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    total = writers * commits_each
    assert len(set(sids)) == total
    got = rows(tmp_path)
    assert sorted(r["id"] for r in got) == list(range(total * rows_each))  # type: ignore[type-var]
    handle = load(tmp_path)
    ids = snapshot_ids(handle)
    assert ids == list(range(1, len(ids) + 1))
    appends = [s for s in handle.store.snapshots.snapshots() if s.commit_kind == CommitKind.APPEND]
    assert sorted(s.id for s in appends) == sorted(sids)
    if write_only == "true":
        assert sorted(sids) == list(range(1, total + 1))
        assert handle.store.snapshots.latest().total_record_count == total * rows_each  # type: ignore[union-attr]


def test_commit_retries_on_top_of_a_writer_that_published_first(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    Table(handle).write(data(range(3)))
    other = Table(load(tmp_path))
    fired: list[int] = []

    def race(call: Call) -> None:
        if call.op == "create_exclusive" and "/snapshot/snapshot-" in call.path and not fired:
            fired.append(other.write(data(range(100, 103), p="b")))  # type: ignore[arg-type]

    io = FaultyFileIO.wrapping(handle.store.io, FaultPlan(before_call=race))
    store = with_io(handle, io)
    sid = store.new_commit("loser").commit(prepare(store, data(range(50, 52))), identifier=1)
    assert fired == [2]
    assert sid == 3
    assert [r["id"] for r in rows(tmp_path)] == [0, 1, 2, 50, 51, 100, 101, 102]
    # the lost attempt's manifests were cleaned up: every manifest file is used by some snapshot
    used = set()
    for s in load(tmp_path).store.snapshots.snapshots():
        for name in (s.base_manifest_list, s.delta_manifest_list):
            used.add(name)
            used |= {m.file_name for m in handle.store.manifests.read_manifest_list(name)}
    assert {p.rsplit("/", 1)[-1] for p in manifest_files(handle)} == used


@pytest.mark.parametrize("order", ["AB", "BA"])
def test_later_commit_of_the_same_key_wins_or_conflicts(tmp_path: Path, order: str) -> None:
    handle = make_table(tmp_path)
    Table(handle).write(data([1], v="base"))
    store = handle.store
    prepared = {name: prepare(store, data([1], v=name)) for name in "AB"}  # both planned on snapshot 1
    first, second = order
    store.new_commit(first).commit(prepared[first], identifier=1)
    try:
        store.new_commit(second).commit(prepared[second], identifier=1)
    except CommitConflictError:
        assert rows(tmp_path) == [{"id": 1, "p": "a", "v": f"{first}1"}]  # refused, not lost
        return
    assert rows(tmp_path) == [{"id": 1, "p": "a", "v": f"{second}1"}]


def test_commit_gives_up_after_max_retries_without_publishing(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    Table(handle).write(data(range(3)))
    other = Table(load(tmp_path))
    counter = iter(range(1000, 2000))

    def always_first(call: Call) -> None:
        if call.op == "create_exclusive" and "/snapshot/snapshot-" in call.path:
            other.write(data([next(counter)], p="b"))

    io = FaultyFileIO.wrapping(handle.store.io, FaultPlan(before_call=always_first))
    store = with_io(handle, io, commit_max_retries=2, commit_timeout_ms=0)  # the count alone
    with pytest.raises(CommitRetriesExhaustedError, match="db.t"):
        store.new_commit("loser").commit(prepare(store, data(range(50, 52))), identifier=1)
    got = [r["id"] for r in rows(tmp_path)]
    assert 50 not in got and got == [0, 1, 2, 1000, 1001, 1002]
    assert all(s.commit_user != "loser" for s in load(tmp_path).store.snapshots.snapshots())


# -- conflicts -------------------------------------------------------------------------------------------------
def _compaction(store: FileStore, snapshot: Snapshot) -> list[CommitMessage]:
    """A full compaction planned on `snapshot`: per bucket, delete every live file and add one merged file."""
    read = store.new_read()
    writer = store.data_file_writer()
    s = store.schema
    messages = []
    for split in store.new_scan().plan(snapshot):
        merged = merge(read.read_records(split), s.key_columns, primary_key=s.has_primary_key, final=True)
        added = writer.write_run(merged, split.partition, split.bucket, level=1)
        messages.append(CommitMessage(split.partition, split.bucket, store.options.bucket, tuple(added), split.files))
    return messages


def test_deleting_a_file_another_commit_removed_is_a_conflict(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    t = Table(handle)
    t.write(data(range(5)))
    t.write(data(range(3, 8), v="y"))
    store = handle.store
    base = store.snapshots.latest()
    assert base is not None
    first, second = _compaction(store, base), _compaction(store, base)
    expected = rows(tmp_path)

    sid = store.new_commit("compactor-1").commit(first, identifier=1, kind=CommitKind.COMPACT)
    assert store.snapshots.get(sid).commit_kind == CommitKind.COMPACT  # type: ignore[arg-type]
    manifests_before = manifest_files(handle)
    deleted_names = {f.file_name for m in second for f in m.deleted}
    with pytest.raises(CommitConflictError) as info:
        store.new_commit("compactor-2").commit(second, identifier=1, kind=CommitKind.COMPACT)
    assert set(info.value.files) == deleted_names
    assert info.value.table == "db.t" and "db.t" in str(info.value)
    assert snapshot_ids(handle) == [1, 2, 3]
    assert rows(tmp_path) == expected
    assert manifest_files(handle) == manifests_before  # nothing written for the failed commit
    # the table stays writable
    t.write(data([100]))
    assert [r["id"] for r in rows(tmp_path)] == [0, 1, 2, 3, 4, 5, 6, 7, 100]


def test_compaction_planned_before_an_overwrite_conflicts_and_loses_nothing(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    t = Table(handle)
    t.write(data(range(4)))
    store = handle.store
    compaction = _compaction(store, store.snapshots.latest())  # type: ignore[arg-type]
    t.write(data([42], v="new"), overwrite=True)
    with pytest.raises(CommitConflictError):
        store.new_commit("compactor").commit(compaction, identifier=1, kind=CommitKind.COMPACT)
    assert rows(tmp_path) == [{"id": 42, "p": "a", "v": "new42"}]


def test_two_overwrites_from_the_same_base_serialize(tmp_path: Path) -> None:
    handle = make_table(tmp_path)
    Table(handle).write(data(range(4)))
    store = handle.store
    first, second = prepare(store, data([10], v="first")), prepare(store, data([20], v="second"))
    store.new_commit("a").commit(first, identifier=1, overwrite="all")
    store.new_commit("b").commit(second, identifier=1, overwrite="all")
    assert rows(tmp_path) == [{"id": 20, "p": "a", "v": "second20"}]
    assert [s.commit_kind for s in store.snapshots.snapshots()] == [
        CommitKind.APPEND, CommitKind.OVERWRITE, CommitKind.OVERWRITE
    ]


# -- crash at every IO step ------------------------------------------------------------------------------------
def _seed(warehouse: Path) -> catalog.CatalogTable:
    """A table with history and enough manifests that the next commit also merges manifests."""
    handle = make_table(warehouse, options={"bucket": "2", "manifest.merge-min-count": "3"})
    t = Table(handle)
    t.write(data(range(6)))
    t.write(data(range(4, 9), p="b", v="y"))
    t.write(pa.table({"id": [1, 5], "p": ["a", "b"], "v": [None, None], "_row_kind": ["-D", "-D"]}))
    return handle


CHANGE = pa.table({"id": [0, 2, 30, 31], "p": ["a", "a", "b", "c"], "v": ["u0", None, "n30", "n31"]}, schema=SCHEMA)


def _attempt(warehouse: Path, plan: FaultPlan) -> int | None:
    handle = load(warehouse)
    store = with_io(handle, FaultyFileIO.wrapping(handle.store.io, plan))
    w = store.new_write()
    w.write(CHANGE)
    return store.new_commit("crashy").commit(w.prepare_commit(), identifier=1)


@pytest.mark.parametrize("mode", ["before", "after", "torn"])
def test_crash_at_every_io_step_leaves_the_previous_table_or_the_complete_commit(
    tmp_path: Path, mode: str
) -> None:
    template = tmp_path / "template"
    _seed(template)
    before = rows(template)

    dry = tmp_path / "dry"
    shutil.copytree(template, dry)
    dry_plan = FaultPlan()
    assert _attempt(dry, dry_plan) == 4
    after = rows(dry)
    assert after != before
    steps = dry_plan.calls
    publish = next(i for i, c in enumerate(steps) if c.op == "create_exclusive" and "/snapshot/snapshot-" in c.path)
    assert publish > 0 and len(steps) > publish
    assert any(c.op == "open_output" and "/bucket-" in c.path for c in steps[:publish])  # data files, streamed

    for i, step in enumerate(steps):
        wh = tmp_path / f"crash-{i}"
        shutil.copytree(template, wh)
        with pytest.raises(InjectedCrash):
            _attempt(wh, FaultPlan(crash_at=i, mode=mode))  # type: ignore[arg-type]
        published = i > publish or (i == publish and mode == "after")
        handle = load(wh)
        ids = snapshot_ids(handle)  # every snapshot file parses: no partial snapshot is visible
        assert ids == ([1, 2, 3, 4] if published else [1, 2, 3]), (i, step)
        assert rows(wh) == (after if published else before), (i, step)
        for sid in ids:
            tablestore.Catalog(str(wh)).get_table("db.t").read(snapshot_id=sid)

        # a retry of the same commit (same user and identifier) succeeds exactly once
        assert _attempt(wh, FaultPlan()) == 4, (i, step)
        assert snapshot_ids(load(wh)) == [1, 2, 3, 4]
        assert rows(wh) == after

        # whatever the crash left behind is unreferenced and orphan removal clears it without harm
        removed = tablestore.Catalog(str(wh)).get_table("db.t").remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
        assert all("/schema/" not in p for p in removed)
        assert rows(wh) == after



# -- crash at every IO step of a write session: its commit, then its compaction -----------------------------------
def _session_attempt(warehouse: Path, plan: FaultPlan) -> int | None:
    from tablestore.write_target import WriteTarget
    from tablestore.writer import TableWriter

    handle = load(warehouse)
    store = with_io(handle, FaultyFileIO.wrapping(handle.store.io, plan), compaction_trigger=1,
                     write_only=False)
    w = TableWriter(WriteTarget(handle.identifier, store, None), commit_user="crashy-session")
    w.write(CHANGE)
    return w.commit(1)


def test_crash_at_every_io_step_of_a_session_commit_and_its_compaction(tmp_path: Path) -> None:
    template = tmp_path / "template"
    _seed(template)
    before = rows(template)

    dry = tmp_path / "dry"
    shutil.copytree(template, dry)
    dry_plan = FaultPlan()
    assert _session_attempt(dry, dry_plan) == 4
    after = rows(dry)
    assert snapshot_ids(load(dry)) == [1, 2, 3, 4, 5]  # APPEND, then the session's COMPACT
    steps = dry_plan.calls
    publishes = [i for i, c in enumerate(steps) if c.op == "create_exclusive" and "/snapshot/snapshot-" in c.path]
    assert len(publishes) == 2

    for i, step in enumerate(steps):
        wh = tmp_path / f"crash-{i}"
        shutil.copytree(template, wh)
        with pytest.raises(BaseException) as info:
            _session_attempt(wh, FaultPlan(crash_at=i, mode="before"))
        assert "injected crash" in str(info.value) or isinstance(info.value.__cause__, InjectedCrash), (i, step)
        appended = i > publishes[0]
        ids = snapshot_ids(load(wh))
        assert ids == ([1, 2, 3, 4, 5] if i > publishes[1] else [1, 2, 3, 4] if appended else [1, 2, 3]), (i, step)
        assert rows(wh) == (after if appended else before), (i, step)
        for sid in ids:
            tablestore.Catalog(str(wh)).get_table("db.t").read(snapshot_id=sid)

        # the job restarts and re-commits checkpoint 1: it lands once (the APPEND is found again if it was in)
        assert _session_attempt(wh, FaultPlan()) == 4, (i, step)
        assert rows(wh) == after
        removed = tablestore.Catalog(str(wh)).get_table("db.t").remove_orphan_files(
            older_than=int(time.time() * 1000) + 60_000)
        assert all("/schema/" not in p for p in removed)
        assert rows(wh) == after
