"""Deletion vectors (`deletion-vectors.enabled`): every snapshot reads as the plain scan of its files minus their
deleted rows, the same rows a merge gives; vectors survive expiry while a snapshot needs them; the option's refusals.
The random sequences against a dict replay are in test_oracle.py (deletion_vectors=True)."""
from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import catalog
import tablestore
from catalog.errors import InvalidOptionError, MergeEngineOptionError
from dv_tables import SCHEMA, deletes, rows

if TYPE_CHECKING:
    from s3_server import S3Server

DV = {"deletion-vectors.enabled": "true", "bucket": "2"}


def by_id(t: pa.Table) -> dict[int, tuple[str, float]]:
    return {r["id"]: (r["name"], r["v"]) for r in t.to_pylist()}


def plain_scan(table: tablestore.Table, snapshot_id: int | None = None) -> dict[int, tuple[str, float]]:
    """What an engine that knows nothing of keys reads: every live file's rows minus its deletion vector's
    positions (read here with pyarrow and the vector's own decoder), no merge."""
    import filestore.deletion

    store = catalog.Catalog(str(Path(table.path).parent.parent)).get_table(table.name).store
    live = store.live_files(store.resolve_snapshot(snapshot_id))
    out: dict[int, tuple[str, float]] = {}
    for key, entry in live.entries.items():
        path = store.data_file_path(entry.partition, entry.bucket, entry.file.file_name)
        data = pq.read_table(path, columns=["id", "name", "v"])
        ref = live.deletion_vectors.get(key)
        if ref is not None:
            data = filestore.deletion.apply(data, filestore.deletion.deleted_positions(store.context, ref))
        for r in data.to_pylist():
            assert r["id"] not in out, f"key {r['id']} live twice"
            out[r["id"]] = (r["name"], r["v"])
    return out


def test_upserts_and_deletes_read_as_the_plain_scan_at_every_snapshot(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    expected: dict[int, dict[int, tuple[str, float]]] = {}
    state: dict[int, tuple[str, float]] = {}
    for version in range(1, 6):
        batch = rows(range(version * 10, version * 10 + 200), version)
        t.write(batch)
        state.update(by_id(batch))
        gone = list(range(version * 7, version * 7 + 15))
        t.write(deletes(gone))
        for i in gone:
            state.pop(i, None)
        expected[t.latest_snapshot_id()] = dict(state)  # type: ignore[index]
    t.compact(full=False)
    expected[t.latest_snapshot_id()] = dict(state)  # type: ignore[index]
    for sid, want in expected.items():
        assert by_id(t.read(snapshot_id=sid)) == want
        assert plain_scan(t, sid) == want
    files = t.files()
    assert sum(f["deleted_row_count"] for f in files) > 0  # type: ignore[misc]
    assert sum(f["row_count"] - f["deleted_row_count"] for f in files) == len(state)  # type: ignore[operator]


def test_a_filtered_read_and_a_full_compaction(cat: tablestore.Catalog) -> None:
    import pyarrow.compute as pc

    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(1000), 1))
    t.write(rows(range(0, 1000, 3), 2))
    t.write(deletes(list(range(0, 1000, 10))))
    want = {i: (f"n{i}-{2 if i % 3 == 0 else 1}", 2.0 if i % 3 == 0 else 1.0) for i in range(1000) if i % 10}
    got = by_id(t.read(filter=(pc.field("id") >= 100) & (pc.field("id") < 130)))
    assert got == {i: r for i, r in want.items() if 100 <= i < 130}
    assert by_id(t.read(filter=pc.field("v") == 2.0)) == {i: r for i, r in want.items() if r[1] == 2.0}
    t.compact(full=True)
    assert by_id(t.read()) == want
    assert all(f["deleted_row_count"] == 0 for f in t.files())  # one run per bucket: nothing left to delete
    assert plain_scan(t) == want


def test_partitioned_table_and_changes_still_hold_every_record(cat: tablestore.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                        ("v", pa.int64())])
    t = cat.create_table("db.p", schema=schema, primary_key=["id", "p"], partition_by=["p"],
                         options={**DV, "log.system": "none"})
    t.write(pa.table({"id": [1, 2, 3], "p": ["a", "a", "b"], "v": [1, 2, 3]}, schema=schema))
    t.write(pa.table({"id": [1, 3], "p": ["a", "b"], "v": [10, 30], "_row_kind": ["+U", "-D"]}))
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "p": "a", "v": 10}, {"id": 2, "p": "a", "v": 2}]
    changes = t.system_table("latest_changes").to_pylist()
    kinds = sorted((c["_row_kind"], c["id"]) for c in changes)
    assert ("-D", 3) in kinds and any(k[1] == 1 for k in kinds)


def test_expiry_keeps_the_vectors_a_retained_snapshot_needs(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={**DV, "bucket": "1"})
    t.write(rows(range(100), 1))
    t.write(rows(range(0, 100, 2), 2))
    t.write(rows(range(0, 100, 4), 3))
    want = by_id(t.read())
    dv_dir = Path(t.path) / "dv"
    assert len(os.listdir(dv_dir)) == 2
    t.expire_snapshots(retain_last=1)
    assert by_id(t.read()) == want and plain_scan(t) == want
    assert len(os.listdir(dv_dir)) == 2  # each names the vector of one of the two older files
    assert t.remove_orphan_files(older_than=dt.timedelta(0)) == []
    t.compact(full=True)
    t.expire_snapshots(retain_last=1)
    assert os.listdir(dv_dir) == []  # one run: no row left to delete, no vector referenced
    assert by_id(t.read()) == want and plain_scan(t) == want


def test_a_compaction_planned_before_a_write_loses_to_it(cat: tablestore.Catalog) -> None:
    """A compaction rewrites rows a write committed since has updated or deleted: its commit marks them deleted
    in its own output (sequence numbers decide, not the order of commits)."""
    import filestore

    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={**DV, "bucket": "1",
                                                                              "write-only": "true"})
    t.write(rows(range(50), 1))
    t.write(rows(range(0, 50, 2), 2))
    store = catalog.Catalog(str(Path(t.path).parent.parent)).get_table("db.t").store
    planned_on = store.snapshots.latest()
    messages = filestore.compact(store.context, planned_on, full=True)
    t.write(rows(range(0, 50, 5), 3))
    t.write(deletes([1, 2, 3]))
    want = by_id(t.read())
    assert t.commit_compaction(messages, planned_on.id) is not None  # type: ignore[union-attr]
    assert by_id(t.read()) == want and plain_scan(t) == want
    assert want[10] == ("n10-3", 3.0) and want[4] == ("n4-2", 2.0) and 2 not in want


@pytest.mark.parametrize("options, primary_key, words", [
    ({}, None, "needs a primary key"),
    ({"merge-engine": "partial-update"}, ["id"], "deduplicate"),
    ({"sequence.field": "v"}, ["id"], "sequence.field"),
])
def test_refused_where_a_key_has_no_single_newest_row(cat: tablestore.Catalog, options: dict[str, str],
                                                      primary_key: list[str] | None, words: str) -> None:
    with pytest.raises(MergeEngineOptionError, match=f"deletion-vectors.enabled.*{words}"):
        cat.create_table("db.t", schema=SCHEMA, primary_key=primary_key, options={**DV, **options})


def test_fixed_at_creation(cat: tablestore.Catalog) -> None:
    cat.create_table("db.t", schema=SCHEMA, primary_key=["id"])
    with pytest.raises(InvalidOptionError, match="deletion-vectors.enabled.*fixed when the table is created"):
        cat.alter_table_options("db.t", set_options={"deletion-vectors.enabled": "true"})


@pytest.mark.s3
def test_on_s3_vectors_are_written_read_and_expired(s3_warehouse: str, s3_server: "S3Server") -> None:
    c = tablestore.Catalog(s3_warehouse, options=s3_server.catalog_options())
    c.create_database("db")
    t = c.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(300), 1))
    t.write(rows(range(0, 300, 2), 2))
    t.write(deletes(list(range(0, 300, 7))))
    want = {i: (f"n{i}-{2 if i % 2 == 0 else 1}", 2.0 if i % 2 == 0 else 1.0) for i in range(300) if i % 7}
    assert by_id(t.read()) == want
    assert sum(f["deleted_row_count"] for f in t.files()) > 0  # type: ignore[misc]
    t.expire_snapshots(retain_last=1)
    again = tablestore.Catalog(s3_warehouse, options=s3_server.catalog_options()).get_table("db.t")
    assert by_id(again.read()) == want
    t.compact(full=True)
    t.expire_snapshots(retain_last=1)
    fs = s3_server.fs()
    assert not [p for p in fs.find(s3_warehouse.removeprefix("s3://")) if "/t/dv/" in p]
    assert by_id(again.read()) == want
