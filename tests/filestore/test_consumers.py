"""Consumers (filestore.consumers) without Kafka: the consumer file, the next snapshot a consumer needs, and snapshot
expiry that keeps what a live consumer needs and deletes expired consumers."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
import tablestore
from filestore import ConsumerError, ConsumerManager, FileStore, expire_snapshots, remove_orphan_files

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def new_store(tmp_path: Path, **options: str) -> FileStore:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    cat.create_table("db.t", schema=SCHEMA, primary_key=["id"],
                     options={"log.system": "none", "bucket": "2", **options})
    return catalog.Catalog(str(tmp_path)).get_table("db.t").store


def commit_offsets(store: FileStore, offsets: list[dict[int, int]]) -> list[int]:
    """One snapshot per entry, each recording these log offsets (as a writer's commit with a log does)."""
    commit = store.new_commit()
    return [commit.commit([], identifier=i, log_offsets=o) for i, o in enumerate(offsets)]  # type: ignore[misc]


OFFSETS = [{0: 2, 1: 1}, {0: 4, 1: 1}, {0: 4, 1: 3}, {0: 6, 1: 5}, {0: 8, 1: 5}]


def test_the_consumer_file_holds_next_snapshot_offsets_and_time(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    consumers = ConsumerManager(store)
    assert consumers.get("job-1") is None and consumers.consumers() == []
    recorded = consumers.record("job-1", {0: 4, 1: 1}, now_ms=1234)
    on_disk = json.loads((Path(store.paths.consumer_file("job-1"))).read_text())
    assert on_disk == {"nextSnapshot": 3, "logOffsets": {"0": 4, "1": 1}, "updateTime": 1234}
    assert consumers.get("job-1") == recorded and consumers.consumers() == [recorded]
    assert recorded.next_snapshot_id == 3   # snapshots 1-2 are at or below {0: 4, 1: 1}; 3 moved bucket 1 on


@pytest.mark.parametrize("offsets, expected", [
    ({}, 1), ({0: 1, 1: 1}, 1), ({0: 2, 1: 1}, 2), ({0: 5, 1: 4}, 4), ({0: 8, 1: 5}, 6), ({0: 99, 1: 99}, 6),
])
def test_the_next_snapshot_is_the_first_commit_not_fully_read(tmp_path: Path, offsets: dict[int, int],
                                                              expected: int) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    assert ConsumerManager(store).record("c", offsets).next_snapshot_id == expected


def test_recording_again_overwrites_and_leaves_no_temp_file(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    consumers = ConsumerManager(store)
    consumers.record("c", {0: 2, 1: 1})
    consumers.record("c", {0: 6, 1: 5})
    assert [c.next_snapshot_id for c in consumers.consumers()] == [5]
    assert sorted(p.name for p in Path(store.paths.consumer_dir).iterdir()) == ["consumer-c"]


def test_expiry_keeps_the_snapshots_a_consumer_needs(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    ConsumerManager(store).record("c", {0: 4, 1: 1})   # next snapshot 3: its changes are computed from snapshot 2
    result = expire_snapshots(store, retain_last=1)
    assert result.expired_snapshots == (1,)
    assert [s.id for s in store.snapshots.snapshots()] == [2, 3, 4, 5]
    ConsumerManager(store).record("c", {0: 8, 1: 5})   # caught up: next snapshot 6, needs 5
    assert expire_snapshots(store, retain_last=1).expired_snapshots == (2, 3, 4)


def test_the_slowest_live_consumer_wins_and_an_expired_one_protects_nothing(tmp_path: Path) -> None:
    store = new_store(tmp_path, **{"consumer.expiration-time": "1 h"})
    commit_offsets(store, OFFSETS)
    now = int(time.time() * 1000)
    consumers = ConsumerManager(store)
    consumers.record("stale", {}, now_ms=now - 2 * 3600_000)   # needs everything, but not updated for 2 h
    consumers.record("slow", {0: 4, 1: 3}, now_ms=now)          # next 4: needs 3 on
    consumers.record("fast", {0: 8, 1: 5}, now_ms=now)
    assert consumers.protected_from(now) == 3
    assert expire_snapshots(store, now, retain_last=1).expired_snapshots == (1, 2)
    assert [c.consumer_id for c in ConsumerManager(store).consumers()] == ["fast", "slow"]   # stale deleted


def test_without_expiration_time_a_consumer_never_expires(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    ConsumerManager(store).record("old", {}, now_ms=0)
    assert expire_snapshots(store, retain_last=1).expired_snapshots == ()
    assert [c.consumer_id for c in ConsumerManager(store).consumers()] == ["old"]


def test_reset_moves_a_consumer_and_delete_removes_it(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    consumers = ConsumerManager(store)
    consumers.record("c", {0: 8, 1: 5})
    moved = consumers.reset("c", 3)
    assert (moved.next_snapshot_id, moved.log_offsets) == (3, {0: 4, 1: 1})   # snapshot 2's offsets
    assert consumers.reset("new", 1).log_offsets == {}
    assert consumers.reset("c", 6).log_offsets == {0: 8, 1: 5}   # latest + 1: from now on
    assert consumers.delete("new") and not consumers.delete("new")
    assert [c.consumer_id for c in consumers.consumers()] == ["c"]


def test_reset_refuses_a_snapshot_it_cannot_start_from(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    expire_snapshots(store, retain_last=3)   # 3, 4, 5 left
    consumers = ConsumerManager(store)
    with pytest.raises(ConsumerError, match=r"table 'db.t': consumer 'c' cannot be reset to snapshot 3: .* 2, "
                                            r"which has expired; the earliest possible is 4"):
        consumers.reset("c", 3)
    with pytest.raises(ConsumerError, match="cannot be reset to snapshot 7: give a snapshot from 1 to 6"):
        consumers.reset("c", 7)
    assert consumers.reset("c", 4).log_offsets == {0: 4, 1: 3}


@pytest.mark.parametrize("bad", ["", "a/b", "../x", ".hidden", "x.tmp", "a b", "-x"])
def test_a_consumer_id_must_be_a_plain_name(tmp_path: Path, bad: str) -> None:
    store = new_store(tmp_path)
    with pytest.raises(ConsumerError, match=r"table 'db.t': consumer .* is not a consumer id"):
        ConsumerManager(store).record(bad, {})


def test_orphan_removal_keeps_consumer_files(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    ConsumerManager(store).record("c", {0: 2})
    assert remove_orphan_files(store, int(time.time() * 1000) + 60_000) == []
    assert ConsumerManager(store).get("c") is not None


@pytest.mark.parametrize("mode", ["before", "after"])
def test_a_crash_while_recording_leaves_the_old_or_the_new_progress(tmp_path: Path, mode: str) -> None:
    from faulty_io import FaultPlan, FaultyFileIO, InjectedCrash

    store = new_store(tmp_path)
    commit_offsets(store, OFFSETS)
    ConsumerManager(store).record("c", {0: 2, 1: 1})
    faulty = FileStore(FaultyFileIO.wrapping(store.io, FaultPlan(crash_at=0, mode=mode)), store.paths.root,
                       store.schema, store.options, store.table_name)
    with pytest.raises(InjectedCrash):
        ConsumerManager(faulty).record("c", {0: 8, 1: 5})
    [c] = ConsumerManager(store).consumers()
    assert c.log_offsets == ({0: 2, 1: 1} if mode == "before" else {0: 8, 1: 5})
