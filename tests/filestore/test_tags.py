"""Tags (filestore.tags) as a user sees them: a tag reads what its snapshot read, survives expiry and orphan removal,
and deleting it deletes exactly the files only its expired snapshot used; locally and on S3."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
import tablestore
from filestore import (FileIO, FileStore, SnapshotNotFoundError, TagError, TagExistsError, TagNotFoundError,
                       create_tag, delete_tag, expire_snapshots)
from s3_server import S3Server

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
NEVER = 2**62   # remove_orphan_files(older_than=NEVER): every unreferenced file is old enough


def new_table(warehouse: str, cat_options: dict[str, str] | None = None, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(warehouse, cat_options or {})
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", schema=SCHEMA, primary_key=["id"],
                            options={"log.system": "none", "write-only": "true", "bucket": "2", **options})


def batch(ids: range | list[int], v: str) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "v": [f"{v}{i}" for i in ids]}, schema=SCHEMA)


def rows(t: tablestore.Table, **at: object) -> list[dict[str, object]]:
    return t.read(**at).sort_by("id").to_pylist()  # type: ignore[arg-type]


def store_of(t: tablestore.Table) -> FileStore:
    return t._store


def referenced(t: tablestore.Table, snapshot_ids: list[int] | None = None, tags: list[str] | None = None) -> set[str]:
    """Every file (data, manifest, index, vector) the given snapshots and tags' snapshots need."""
    from filestore.expire import _referenced

    store = store_of(t)
    found: set[str] = set()
    for sid in snapshot_ids or []:
        found |= _referenced(store, store.snapshots.get(sid))
    for name in tags or []:
        found |= _referenced(store, store.tags.get(name).snapshot)
    return found


def data_and_metadata(io: FileIO, root: str) -> set[str]:
    """The files under the table that snapshots reference (not schema, snapshot, tag or hint files)."""
    skip = ("/schema/", "/snapshot/", "/tag/")
    return {s.path for s in io.walk_files(root) if not any(d in s.path for d in skip)}


def test_a_tag_is_a_copy_of_its_snapshot_file_made_once(tmp_path: Path) -> None:
    t = new_table(str(tmp_path))
    t.write(batch(range(5), "a"))
    t.write(batch(range(5, 8), "b"))
    info = t.create_tag("first", snapshot=1)
    assert (info.name, info.snapshot_id, info.record_count) == ("first", 1, 5)
    snapshot_json = json.loads((tmp_path / "db.db" / "t" / "snapshot" / "snapshot-1").read_text())
    tag_json = json.loads((tmp_path / "db.db" / "t" / "tag" / "tag-first").read_text())
    created = tag_json.pop("tagCreateTime")
    assert tag_json == snapshot_json and abs(created - time.time() * 1000) < 60_000
    assert info.create_time_millis == created and info.commit_time_millis == snapshot_json["timeMillis"]

    latest = t.create_tag("now")   # default: the latest snapshot
    assert latest.snapshot_id == 2
    with pytest.raises(TagExistsError, match=r"table 'db.t': tag 'first' exists already \(on snapshot 1\)"):
        t.create_tag("first", snapshot=2)
    assert [(i.name, i.snapshot_id) for i in t.tags()] == [("first", 1), ("now", 2)]   # in creation order
    assert rows(t, tag="first") == rows(t, snapshot_id=1) and rows(t, tag="now") == rows(t)
    assert list(t.read_batches(tag="first")) and t.read(tag="first").num_rows == 5


@pytest.mark.parametrize("name, reason", [
    ("", "non-empty"), ("a/b", "no '/'"), ("42", "snapshot id"), (" x", "surrounding spaces"), (".x", "leading"),
])
def test_bad_tag_names_are_refused_naming_table_and_tag(tmp_path: Path, name: str, reason: str) -> None:
    t = new_table(str(tmp_path))
    t.write(batch(range(3), "a"))
    with pytest.raises(TagError, match=f"table 'db.t': tag '{name}' is not a tag name.*{reason}"):
        t.create_tag(name)
    assert t.tags() == [] and not (tmp_path / "db.db" / "t" / "tag").exists()


def test_tags_of_missing_snapshots_and_missing_tags_are_clear_errors(tmp_path: Path) -> None:
    t = new_table(str(tmp_path))
    with pytest.raises(TagError, match="tag 'x' cannot be created: the table has no snapshot yet"):
        t.create_tag("x")
    t.write(batch(range(3), "a"))
    with pytest.raises(TagError, match=r"tag 'x' cannot be created: the table has no snapshot 7 .*retained: 1\.\.1"):
        t.create_tag("x", snapshot=7)
    with pytest.raises(TagNotFoundError, match=r"table 'db.t': tag 'nope' does not exist \(it has no tags\)"):
        t.read(tag="nope")
    t.create_tag("x")
    with pytest.raises(TagNotFoundError, match=r"tag 'nope' does not exist \(its tags: x\)"):
        t.delete_tag("nope")
    with pytest.raises(SnapshotNotFoundError):   # TagNotFoundError is a SnapshotNotFoundError (time travel)
        t.read(tag="nope")


def history(t: tablestore.Table) -> list[list[dict[str, object]]]:
    """Five snapshots with overwrites and a compaction: old snapshots use files the latest does not."""
    t.write(batch(range(10), "a"))
    t.write(batch(range(5, 15), "b"))
    t.write(batch(range(20, 25), "c"), overwrite=True)
    t.compact(full=True)
    t.write(batch(range(22, 30), "d"))
    assert t.latest_snapshot_id() == 5
    return [rows(t, snapshot_id=sid) for sid in range(1, 6)]


@pytest.mark.parametrize("options", [{}, {"deletion-vectors.enabled": "true"}], ids=["plain", "deletion-vectors"])
def test_a_tag_reads_what_its_snapshot_read_after_expiry_and_orphan_removal(tmp_path: Path,
                                                                             options: dict[str, str]) -> None:
    t = new_table(str(tmp_path), None, **options)
    before = history(t)
    t.create_tag("two", snapshot=2)
    t.create_tag("four", snapshot=4)
    tagged = referenced(t, tags=["two", "four"])
    t.write(batch(range(0, 3), "e"))
    t.compact(full=True)
    result = t.expire_snapshots(retain_last=1)
    assert result.expired_snapshots == (1, 2, 3, 4, 5, 6) and result.deleted_files > 0
    assert all(Path(p).exists() for p in tagged)
    assert rows(t, tag="two") == before[1] and rows(t, tag="four") == before[3]
    assert rows(t, snapshot_id=2) == before[1]   # VERSION AS OF 2 reads the tag's copy once the snapshot expired
    with pytest.raises(SnapshotNotFoundError):
        t.read(snapshot_id=3)
    root = store_of(t).paths.root
    assert data_and_metadata(store_of(t).io, root) == tagged | referenced(t, [7])   # nothing else survived

    assert t.remove_orphan_files(older_than=NEVER) == []   # tagged files and tag files are never orphans
    assert rows(t, tag="two") == before[1] and [i.name for i in t.tags()] == ["two", "four"]
    fresh = tablestore.Catalog(str(tmp_path)).get_table("db.t")
    assert rows(fresh, tag="four") == before[3]


def test_deleting_a_tag_deletes_only_the_files_nothing_else_needs(tmp_path: Path) -> None:
    t = new_table(str(tmp_path))
    before = history(t)
    for name, sid in (("one", 1), ("two", 2), ("five", 5)):
        t.create_tag(name, snapshot=sid)
    t.write(batch([40], "f"))
    assert t.expire_snapshots(retain_last=2).expired_snapshots == (1, 2, 3, 4)
    store = store_of(t)
    keep_after_two = referenced(t, [5, 6], ["one", "five"])
    only_two = referenced(t, tags=["two"]) - keep_after_two
    assert only_two   # snapshot 2 added files that neither 1, nor 5, 6 use

    t.delete_tag("two")
    assert not any(Path(p).exists() for p in only_two)
    assert data_and_metadata(store.io, store.paths.root) == keep_after_two
    assert rows(t, tag="one") == before[0] and rows(t, tag="five") == before[4]
    assert t.remove_orphan_files(older_than=NEVER) == []

    t.delete_tag("five")   # snapshot 5 is still retained: no file goes yet ...
    assert data_and_metadata(store.io, store.paths.root) == keep_after_two
    t.write(batch([41], "g"))
    t.expire_snapshots(retain_last=1)   # ... expiry deletes them once it expires
    assert data_and_metadata(store.io, store.paths.root) == referenced(t, [7], ["one"])
    t.delete_tag("one")
    assert data_and_metadata(store.io, store.paths.root) == referenced(t, [7])
    assert t.tags() == [] and rows(t, snapshot_id=7) == rows(t)


def test_two_tags_on_one_snapshot_keep_it_until_both_are_deleted(tmp_path: Path) -> None:
    t = new_table(str(tmp_path))
    before = history(t)
    t.create_tag("a", snapshot=3)
    t.create_tag("b", snapshot=3)
    t.expire_snapshots(retain_last=1)
    assert delete_tag(store_of(t), "a") == 0   # "b" still needs every file
    assert rows(t, tag="b") == before[2]
    assert delete_tag(store_of(t), "b") > 0


def test_a_tag_whose_snapshot_expires_while_it_is_made_is_withdrawn(tmp_path: Path) -> None:
    """filestore.tags invariant 4: the creator checks the snapshot after publishing the tag."""
    t = new_table(str(tmp_path))
    history(t)
    store = store_of(t)
    publish = store.tags.try_create

    def expire_meanwhile(tag: object) -> bool:
        won = publish(tag)  # type: ignore[arg-type]
        store.snapshots.delete(2)   # an expiry that listed the tags before the tag was published
        return won

    store.tags.try_create = expire_meanwhile  # type: ignore[method-assign]
    with pytest.raises(TagError, match="tag 'late' cannot be created: snapshot 2 expired meanwhile"):
        create_tag(store, "late", 2)
    assert store.tags.names() == []


def test_a_tag_made_while_expiry_runs_keeps_its_files(tmp_path: Path) -> None:
    """filestore.tags invariant 4, expiry's side: a tag published before its snapshot's file is deleted is seen."""
    t = new_table(str(tmp_path))
    before = history(t)
    store = store_of(t)
    delete_snapshot = store.snapshots.delete

    def tag_first(snapshot_id: int) -> None:
        if snapshot_id == 2:   # expiry chose its snapshots already; a creator publishes its tag now
            create_tag(store, "racer", 2)
        delete_snapshot(snapshot_id)

    store.snapshots.delete = tag_first  # type: ignore[method-assign]
    assert expire_snapshots(store, retain_last=1).expired_snapshots == (1, 2, 3, 4)
    assert rows(t, tag="racer") == before[1]


def test_orphan_removal_keeps_tags_but_not_a_crashed_creates_temp_file(tmp_path: Path) -> None:
    t = new_table(str(tmp_path))
    t.write(batch(range(3), "a"))
    t.create_tag("kept")
    leftover = tmp_path / "db.db" / "t" / "tag" / ".tag-lost.0123.tmp"   # FileIO.create_exclusive's temp name
    leftover.write_text("{}")
    assert t.remove_orphan_files(older_than=NEVER) == [str(leftover)]
    assert [i.name for i in t.tags()] == ["kept"]


def test_drop_table_removes_its_tags(tmp_path: Path) -> None:
    t = new_table(str(tmp_path))
    t.write(batch(range(3), "a"))
    t.create_tag("keep")
    cat = tablestore.Catalog(str(tmp_path))
    cat.drop_table("db.t")
    assert not (tmp_path / "db.db" / "t").exists()
    again = new_table(str(tmp_path))
    assert again.tags() == []


@pytest.mark.s3
def test_tags_on_s3_survive_expiry_and_delete_their_files(s3_warehouse: str, s3_server: S3Server) -> None:
    t = new_table(s3_warehouse, s3_server.catalog_options())
    before = history(t)
    t.create_tag("two", snapshot=2)
    with pytest.raises(TagExistsError):   # the conditional put refuses a second tag of the name
        t.create_tag("two", snapshot=3)
    store = store_of(t)
    t.expire_snapshots(retain_last=1)
    fresh = tablestore.Catalog(s3_warehouse, s3_server.catalog_options()).get_table("db.t")
    assert rows(fresh, tag="two") == before[1] and [i.snapshot_id for i in fresh.tags()] == [2]
    assert data_and_metadata(store.io, store.paths.root) == referenced(t, [5], ["two"])
    assert t.remove_orphan_files(older_than=NEVER) == []
    t.delete_tag("two")
    assert t.tags() == [] and data_and_metadata(store.io, store.paths.root) == referenced(t, [5])
    assert rows(t) == before[4]
    catalog.Catalog(s3_warehouse, s3_server.catalog_options()).drop_table("db.t")
    assert not list(store.io.walk_files(store.paths.root))
