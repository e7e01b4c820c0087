"""Snapshot expiration and orphan-file removal (filestore.expire) as a user sees them: which snapshots remain
readable, and exactly which files are deleted."""
from __future__ import annotations

import datetime as dt
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
import tablestore
from faulty_io import FaultPlan, FaultyFileIO, InjectedCrash
from filestore import FileStore, SnapshotNotFoundError
from filestore.expire import expire_snapshots

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def new_table(tmp_path: Path, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", schema=SCHEMA, primary_key=["id"],
                            options={"write-only": "true", "bucket": "2", **options})


def batch(ids: range | list[int], v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def handle_of(tmp_path: Path) -> catalog.CatalogTable:
    return catalog.Catalog(str(tmp_path)).get_table("db.t")


def files_on_disk(root: str, under: str = "") -> set[str]:
    return {str(p) for p in Path(root).rglob("*") if p.is_file() and (not under or f"/{under}/" in str(p))}


def data_files_of(handle: catalog.CatalogTable, snapshot_id: int) -> set[str]:
    store = handle.store
    return {store.data_file_path(e.partition, e.bucket, e.file.file_name)
            for e in store.live_entries(store.snapshots.get(snapshot_id)).values()}


def metadata_files_of(handle: catalog.CatalogTable, snapshot_id: int) -> set[str]:
    store = handle.store
    s = store.snapshots.get(snapshot_id)
    out = set()
    for name in (s.base_manifest_list, s.delta_manifest_list):
        out.add(store.paths.manifest_file(name))
        out |= {store.paths.manifest_file(m.file_name) for m in store.manifests.read_manifest_list(name)}
    return out


def history(t: tablestore.Table) -> list[int]:
    """Six snapshots; the overwrites leave files that only old snapshots use."""
    sids = [
        t.write(batch(range(10), "a")),
        t.write(batch(range(10, 20), "b")),
        t.write(batch(range(20, 25), "c"), overwrite=True),
        t.write(batch(range(22, 30), "d")),
        t.write(batch(range(30, 33), "e"), overwrite=True),
        t.write(batch(range(31, 35), "f")),
    ]
    assert sids == [1, 2, 3, 4, 5, 6]
    return sids  # type: ignore[return-value]


def contents(t: tablestore.Table, sid: int | None = None) -> list[dict[str, object]]:
    return t.read(snapshot_id=sid).sort_by("id").to_pylist()


def test_expire_keeps_max_snapshots_and_deletes_exactly_the_unused_files(tmp_path: Path) -> None:
    t = new_table(tmp_path, **{"snapshot.num-retained.min": "2", "snapshot.num-retained.max": "3"})
    sids = history(t)
    handle = handle_of(tmp_path)
    before = {sid: contents(t, sid) for sid in sids}
    data = {sid: data_files_of(handle, sid) for sid in sids}
    meta = {sid: metadata_files_of(handle, sid) for sid in sids}
    all_data = files_on_disk(t.path, "bucket-0") | files_on_disk(t.path, "bucket-1")
    assert all_data == set().union(*data.values())

    result = t.expire_snapshots()
    assert result.expired_snapshots == (1, 2, 3)
    assert [s.id for s in t.snapshots()] == [4, 5, 6]
    retained_data = data[4] | data[5] | data[6]
    retained_meta = meta[4] | meta[5] | meta[6]
    now_data = files_on_disk(t.path, "bucket-0") | files_on_disk(t.path, "bucket-1")
    assert now_data == retained_data
    assert files_on_disk(t.path, "manifest") == retained_meta
    deleted = (all_data - now_data) | ((meta[1] | meta[2] | meta[3]) - retained_meta)
    assert deleted and result.deleted_files == len(deleted)
    assert not (Path(t.path) / "snapshot" / "snapshot-3").exists()

    for sid in (1, 2, 3):
        with pytest.raises(SnapshotNotFoundError, match="db.t"):
            t.read(snapshot_id=sid)
    for sid in (4, 5, 6):
        assert contents(t, sid) == before[sid]
    assert contents(t) == before[6]
    # a fresh reader agrees, and the next commit continues the ids
    fresh = tablestore.Catalog(str(tmp_path)).get_table("db.t")
    assert [s.id for s in fresh.snapshots()] == [4, 5, 6]
    assert fresh.write(batch([99], "g")) == 7
    assert t.expire_snapshots().expired_snapshots == (4,)


def test_expire_by_age_respects_the_minimum(tmp_path: Path) -> None:
    t = new_table(tmp_path, **{"snapshot.num-retained.min": "2", "snapshot.time-retained": "1 h"})
    history(t)
    assert t.expire_snapshots().expired_snapshots == ()  # everything is younger than an hour
    assert len(t.snapshots()) == 6
    store = handle_of(tmp_path).store
    latest = store.snapshots.latest()
    assert latest is not None
    two_hours_later = latest.time_millis + 2 * 3_600_000
    assert expire_snapshots(store, now_ms=two_hours_later).expired_snapshots == (1, 2, 3, 4)
    assert [s.id for s in t.snapshots()] == [5, 6]
    assert contents(t) == [{"id": i, "v": v} for i, v in
                           [(30, "e30"), (31, "f31"), (32, "f32"), (33, "f33"), (34, "f34")]]


def test_short_time_retained_expires_all_but_the_minimum(tmp_path: Path) -> None:
    t = new_table(tmp_path, **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    history(t)
    first_time = t.snapshots()[0].time_millis
    time.sleep(0.01)
    assert t.expire_snapshots().expired_snapshots == (1, 2, 3, 4, 5)
    assert [s.id for s in t.snapshots()] == [6]
    with pytest.raises(SnapshotNotFoundError):
        t.read(timestamp_ms=first_time)
    assert len(contents(t)) == 5


def test_the_latest_snapshot_is_never_expired(tmp_path: Path) -> None:
    t = new_table(tmp_path, **{"snapshot.num-retained.min": "0", "snapshot.num-retained.max": "0"})
    history(t)
    assert t.expire_snapshots().expired_snapshots == (1, 2, 3, 4, 5)
    assert [s.id for s in t.snapshots()] == [6]
    assert len(contents(t)) == 5
    assert t.write(batch([50], "g")) == 7


def test_crash_during_expire_leaves_retained_snapshots_readable(tmp_path: Path) -> None:
    template = tmp_path / "template"
    t = new_table(template, **{"snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2"})
    history(t)
    expected = {sid: contents(t, sid) for sid in range(1, 7)}

    def faulty_store(warehouse: Path, plan: FaultPlan) -> FileStore:
        h = handle_of(warehouse)
        return FileStore(FaultyFileIO.wrapping(h.store.io, plan), h.path, h.schema, h.store.options, h.identifier)

    dry = tmp_path / "dry"
    shutil.copytree(template, dry)
    dry_plan = FaultPlan(ops=("delete",))
    expire_snapshots(faulty_store(dry, dry_plan))
    deletes = len(dry_plan.calls)
    assert deletes > 6

    for i in range(deletes):
        wh = tmp_path / f"crash-{i}"
        shutil.copytree(template, wh)
        with pytest.raises(InjectedCrash):
            expire_snapshots(faulty_store(wh, FaultPlan(crash_at=i, ops=("delete",))))
        t = tablestore.Catalog(str(wh)).get_table("db.t")
        listed = [s.id for s in t.snapshots()]
        assert listed[-2:] == [5, 6], i
        for sid in listed:  # whatever is still listed is whole
            assert contents(t, sid) == expected[sid], (i, sid)
        # re-running expiration and orphan removal finish the job
        t.expire_snapshots()
        t.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
        handle = handle_of(wh)
        assert [s.id for s in t.snapshots()] == [5, 6]
        assert files_on_disk(t.path, "bucket-0") | files_on_disk(t.path, "bucket-1") == \
            data_files_of(handle, 5) | data_files_of(handle, 6), i
        assert files_on_disk(t.path, "manifest") == metadata_files_of(handle, 5) | metadata_files_of(handle, 6), i
        assert contents(t) == expected[6]


# -- orphan files ----------------------------------------------------------------------------------------------
def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


@pytest.mark.parametrize("older_than", ["timedelta", "datetime", "epoch_ms", "default"])
def test_remove_orphan_files_deletes_only_old_unreferenced_files(tmp_path: Path, older_than: str) -> None:
    t = new_table(tmp_path)
    t.write(batch(range(10), "a"))
    t.write(batch(range(5, 15), "b"))
    root = Path(t.path)
    referenced = files_on_disk(t.path)
    two_days = 2 * 86_400
    for f in referenced:
        _age(Path(f), two_days)  # old but referenced: must survive
    old_orphans = [root / "bucket-0" / "data-orphan-old.parquet", root / "manifest" / "manifest-orphan.avro",
                   root / "snapshot" / ".snapshot-9.deadbeef.tmp"]
    young_orphan = root / "bucket-1" / "data-orphan-young.parquet"
    for orphan in [*old_orphans, young_orphan]:
        orphan.write_bytes(b"junk")
    for orphan in old_orphans:
        _age(orphan, two_days)

    arg: object = {
        "timedelta": dt.timedelta(hours=1),
        "datetime": dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1),
        "epoch_ms": int((time.time() - 3600) * 1000),
        "default": None,
    }[older_than]
    removed = t.remove_orphan_files() if arg is None else t.remove_orphan_files(older_than=arg)  # type: ignore[arg-type]
    assert set(removed) == {str(f) for f in old_orphans}
    assert files_on_disk(t.path) == referenced | {str(young_orphan)}
    assert contents(t) == [{"id": i, "v": ("a" if i < 5 else "b") + str(i)} for i in range(15)]
    assert len(contents(t, 1)) == 10


def test_orphan_removal_keeps_files_of_every_retained_snapshot(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    history(t)
    before = {sid: contents(t, sid) for sid in range(1, 7)}
    on_disk = files_on_disk(t.path)
    assert t.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000) == []
    assert files_on_disk(t.path) == on_disk
    for sid, rows in before.items():
        assert contents(t, sid) == rows


def test_expire_with_nothing_to_do(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    assert t.expire_snapshots().expired_snapshots == ()
    t.write(batch(range(3), "a"))
    assert t.expire_snapshots().expired_snapshots == ()
    assert [s.id for s in t.snapshots()] == [1]
