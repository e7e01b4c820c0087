"""What expiry and orphan removal keep for the Delta and Iceberg views (filestore.views.listed_files and
needed_view_file): a bucket a view does not publish yet stays listed with files a compaction has since replaced in
the table, and a reader of the view still finds them after the snapshots that used them expire; once the view
moves on, orphan removal deletes them. Files a crashed Iceberg publisher left in the metadata directory are
orphans; the log and the metadata the view needs are not."""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import catalog
import filestore
import tablestore
from dv_tables import SCHEMA, normalized, rows

deltalake = pytest.importorskip("deltalake")
pyiceberg_table = pytest.importorskip("pyiceberg.table")

VIEWS = {"metadata.delta.enabled": "true", "metadata.iceberg.storage": "table-location", "log.system": "none",
         "bucket": "1", "write-only": "true"}


def delta_rows(table: tablestore.Table) -> pa.Table:
    return pa.RecordBatchReader.from_stream(deltalake.DeltaTable(table.path).scan()).read_all()


def iceberg_rows(table: tablestore.Table) -> pa.Table:
    metadata = max((Path(table.path) / "metadata").glob("v*.metadata.json"), key=lambda p: int(p.name[1:-14]))
    return pyiceberg_table.StaticTable.from_metadata(str(metadata)).scan().to_arrow()


def assert_views_read(table: tablestore.Table, want_rows: pa.Table | None = None) -> None:
    """Both views read `want_rows` (default: the table)."""
    want = normalized(table.read() if want_rows is None else want_rows, SCHEMA.names)
    assert normalized(delta_rows(table), SCHEMA.names) == want
    assert normalized(iceberg_rows(table), SCHEMA.names) == want


def data_files(table: tablestore.Table) -> set[str]:
    return {p.name for p in Path(table.path).rglob("*.parquet") if "_delta_log" not in p.parts}


def test_a_lagging_bucket_s_replaced_files_outlive_expiry_until_the_view_moves_on(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=VIEWS)
    t.write(rows(range(20), 1))                    # one run: published
    first = t.read()
    published = data_files(t)
    store = catalog.Catalog(str(Path(t.path).parent.parent)).get_table("db.t").store
    planned_on = store.snapshots.latest()
    messages = filestore.compact(store.context, planned_on, full=True)
    t.write(rows(range(10, 30), 2))                # two runs: the bucket lags, the view keeps the first file
    assert t.commit_compaction(messages, planned_on.id) is not None   # replaces the first file; still two runs
    assert not published & {f["file"] for f in t.files()}
    t.expire_snapshots(retain_last=1)
    assert published <= data_files(t)              # the view still lists it
    assert_views_read(t, first)                    # lagging, and readable
    t.remove_orphan_files(older_than=10**13)
    assert published <= data_files(t)
    assert_views_read(t, first)
    t.compact(full=True)                           # one run again: the view moves on
    assert_views_read(t)
    t.expire_snapshots(retain_last=1)
    t.remove_orphan_files(older_than=10**13)
    assert not published & data_files(t)           # then orphan removal deletes the replaced file
    assert_views_read(t)


def test_a_crashed_iceberg_publisher_s_files_are_orphans_and_the_views_own_are_not(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"],
                         options={**VIEWS, "deletion-vectors.enabled": "true", "write-only": "false"})
    t.write(rows(range(20), 1))
    t.write(rows(range(0, 20, 3), 2))
    metadata, log = Path(t.path) / "metadata", Path(t.path) / "_delta_log"
    stray = [metadata / "0f0e0d0c-m0.avro", metadata / "snap-9-0f0e0d0c.avro", metadata / "dv-9-0f0e0d0c.puffin"]
    for p in stray:
        p.write_bytes(b"left by a publisher that crashed")
    young = metadata / "1a2b3c4d-m0.avro"
    young.write_bytes(b"a publisher still writing")
    old = time.time() - 3 * 86400
    for p in stray:
        os.utime(p, (old, old))
    kept_metadata = {p.name for p in metadata.iterdir()} - {p.name for p in stray}
    kept_log = {p.name for p in log.iterdir()}
    removed = t.remove_orphan_files()              # the default grace: one day
    assert sorted(Path(p).name for p in removed) == sorted(p.name for p in stray)
    assert {p.name for p in metadata.iterdir()} == kept_metadata and {p.name for p in log.iterdir()} == kept_log
    assert_views_read(t)
    t.write(rows(range(5), 3))
    assert_views_read(t)


def test_a_table_without_the_iceberg_view_leaves_a_metadata_directory_alone(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"log.system": "none"})
    t.write(rows(range(5), 1))
    (Path(t.path) / "metadata").mkdir()
    (Path(t.path) / "metadata" / "notes.avro").write_bytes(b"not the table's")
    t.remove_orphan_files(older_than=10**13)
    assert (Path(t.path) / "metadata" / "notes.avro").exists()


def test_the_views_lists_are_read_once_per_removal(cat: tablestore.Catalog, monkeypatch: Any) -> None:
    from filestore.views import iceberg

    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"],
                         options={**VIEWS, "deletion-vectors.enabled": "true", "write-only": "false"})
    for i in range(3):
        t.write(rows(range(i, i + 5), i))
    calls = []
    real = iceberg.metadata_files
    monkeypatch.setattr(iceberg, "metadata_files", lambda context: calls.append(1) or real(context))
    t.remove_orphan_files(older_than=10**13)
    assert calls == [1]
