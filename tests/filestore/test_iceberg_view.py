"""The Iceberg view (filestore.views.iceberg): pyiceberg reads every published snapshot exactly as the table reads
it (user columns, sorted), with deletion vectors, compactions, expiry, schema changes, partitions with a null value,
a failed publish caught up at the next commit, and a primary-key table without deletion vectors lagging until
compaction."""
from __future__ import annotations

import io
import json
import logging
import os
import re
import sys
import types
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore

from duckdb_ext import connect_with
from dv_tables import SCHEMA, deletes, normalized, rows, write_history
from filestore.views import iceberg, iceberg_state

pyiceberg_table = pytest.importorskip("pyiceberg.table")

ICEBERG = {"metadata.iceberg.storage": "table-location", "log.system": "none", "bucket": "2"}
DV = {**ICEBERG, "deletion-vectors.enabled": "true"}


def metadata_files(table: tablestore.Table) -> dict[int, Path]:
    found = {}
    for p in (Path(table.path) / "metadata").glob("v*.metadata.json"):
        m = re.fullmatch(r"v(\d+)\.metadata\.json", p.name)
        if m:
            found[int(m.group(1))] = p
    return found


def view(table: tablestore.Table) -> Any:
    files = metadata_files(table)
    return pyiceberg_table.StaticTable.from_metadata(str(files[max(files)]))


def metadata_dir_files(table: tablestore.Table) -> set[str]:
    return {p.name for p in (Path(table.path) / "metadata").iterdir()}


def needed_files(table: tablestore.Table, static: Any) -> set[str]:
    """The metadata-directory files the retained Iceberg snapshots use, as pyiceberg finds them."""
    found = {"version-hint.text", *(f"v{s.snapshot_id}.metadata.json" for s in static.metadata.snapshots)}
    for s in static.metadata.snapshots:
        found.add(s.manifest_list.rsplit("/", 1)[-1])
        for m in s.manifests(static.io):
            found.add(m.manifest_path.rsplit("/", 1)[-1])
            found |= {e.data_file.file_path.rsplit("/", 1)[-1] for e in m.fetch_manifest_entry(static.io)
                      if e.data_file.content.value != 0}
    return found


def assert_view_matches(table: tablestore.Table, snapshot_id: int | None = None) -> None:
    static = view(table)
    columns = table.schema.names
    want = table.read(snapshot_id=snapshot_id)
    got = static.scan(snapshot_id=snapshot_id).to_arrow()
    if snapshot_id is not None:  # an older snapshot reads under the schema it was written with
        columns = [c for c in columns if c in got.column_names]
    assert normalized(got, columns) == normalized(want, columns)


def test_upserts_deletes_and_time_travel(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    write_history(t)
    static = view(t)
    sids = [s.snapshot_id for s in static.metadata.snapshots]
    assert sids == list(range(1, t.latest_snapshot_id() + 1))  # type: ignore[operator]
    assert [s.parent_snapshot_id for s in static.metadata.snapshots] == [None, *sids[:-1]]
    assert [s.sequence_number for s in static.metadata.snapshots] == sids
    assert static.metadata.format_version == 3
    for sid in sids:
        assert_view_matches(t, sid)
    assert_view_matches(t)
    hint = (Path(t.path) / "metadata" / "version-hint.text").read_text()
    assert hint == str(sids[-1])
    # the data files are the table's own, named by absolute URI; deletes are Puffin deletion vectors
    tasks = list(static.scan().plan_files())
    assert all(task.file.file_path.startswith("file:///") for task in tasks)
    dvs = {d for task in tasks for d in task.delete_files}
    assert dvs and all(d.file_format.value == "PUFFIN" and d.content.value == 1 for d in dvs)
    entries: list[Any] = [e for m in static.current_snapshot().manifests(static.io) if m.content.value == 1
                          for e in fastavro.reader(io.BytesIO(Path(m.manifest_path.removeprefix("file://"))
                                                              .read_bytes()))]
    assert entries and all(e["data_file"]["referenced_data_file"].startswith("file:///")
                           and e["data_file"]["content_size_in_bytes"] > 0 for e in entries)


def test_only_changed_vectors_are_written_again(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={**DV, "bucket": "1"})
    t.write(rows(range(100), 1))
    t.write(rows(range(0, 10), 2))                  # sets positions in the first file
    puffins = set((Path(t.path) / "metadata").glob("*.puffin"))
    assert len(puffins) == 1
    t.write(rows(range(200, 210), 3))               # no vector changes
    assert set((Path(t.path) / "metadata").glob("*.puffin")) == puffins
    t.write(rows(range(50, 55), 4))                 # first file's vector grows
    assert len(set((Path(t.path) / "metadata").glob("*.puffin"))) == 2
    assert_view_matches(t)


def test_a_table_without_the_option_has_no_metadata_dir(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"],
                         options={"deletion-vectors.enabled": "true", "log.system": "none", "bucket": "2"})
    t.write(rows(range(10), 1))
    assert not (Path(t.path) / "metadata").exists()


def test_partitioned_table_with_a_null_partition(cat: tablestore.Catalog) -> None:
    schema = pa.schema([("p", pa.string()), ("d", pa.date32()), ("x", pa.int64())])
    t = cat.create_table("db.p", schema=schema, partition_by=["p", "d"], options=ICEBERG)
    import datetime as dt
    day = dt.date(2024, 5, 1)
    t.write(pa.table({"p": ["a", None, "b", None], "d": [day, day, None, day], "x": [1, 2, 3, 4]}, schema=schema))
    t.write(pa.table({"p": ["a", None], "d": [day, None], "x": [5, 6]}, schema=schema))
    assert_view_matches(t)
    static = view(t)
    spec = static.metadata.spec()
    assert [(f.name, f.transform.__class__.__name__) for f in spec.fields] == [
        ("p", "IdentityTransform"), ("d", "IdentityTransform")]
    partitions = {tuple(task.file.partition) for task in static.scan().plan_files()}
    days = (day - dt.date(1970, 1, 1)).days       # pyiceberg keeps a date partition value as days
    assert (None, days) in partitions and ("b", None) in partitions and (None, None) in partitions
    # a filter on the partition column prunes by the typed values
    got = static.scan(row_filter="p IS NULL").to_arrow()
    assert sorted(got.column("x").to_pylist()) == [2, 4, 6]


def test_primary_key_table_without_vectors_lags_until_compaction(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={**ICEBERG, "bucket": "1"})
    t.write(rows(range(20), 1))
    first = t.latest_snapshot_id()
    assert_view_matches(t)                          # one run: published
    t.write(rows(range(0, 5), 2))
    t.write(deletes([7, 8]))
    # two runs and a DELETE: the view keeps the last exact state of the bucket
    got = view(t).scan().to_arrow()
    assert normalized(got, SCHEMA.names) == normalized(t.read(snapshot_id=first), SCHEMA.names)
    t.compact(full=True)
    assert_view_matches(t)


def test_a_failed_publish_is_caught_up_by_the_next_commit(cat: tablestore.Catalog,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(50), 1))
    real = iceberg._publish_snapshot
    calls = {"n": 0}

    def failing(*args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(iceberg, "_publish_snapshot", failing)
    with caplog.at_level(logging.WARNING):
        t.write(rows(range(10, 20), 2))             # committed; its view is not published
    assert "disk full" in caplog.text
    assert t.read().num_rows == 50
    assert max(metadata_files(t)) == 1              # lags
    t.write(deletes([1, 2, 3]))                     # publishes 2 then 3
    assert sorted(metadata_files(t)) == [1, 2, 3]
    for sid in (1, 2, 3):
        assert_view_matches(t, sid)


def test_catch_up_over_expired_snapshots(cat: tablestore.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(30), 1))
    monkeypatch.setattr(iceberg, "_publish_snapshot", lambda *a, **k: (_ for _ in ()).throw(OSError("down")))
    for version in range(2, 6):
        t.write(rows(range(version, version + 10), version))
    t.expire_snapshots(retain_last=2)
    monkeypatch.undo()
    t.write(rows(range(100, 105), 9))
    static = view(t)
    retained = [s.id for s in t.snapshots()]
    assert 1 not in retained
    assert [s.snapshot_id for s in static.metadata.snapshots] == retained  # 1 was expired and dropped
    assert static.metadata.snapshots[0].parent_snapshot_id == 1             # published straight from 1
    assert sorted(metadata_files(t)) == retained                             # v1's files dropped with it
    assert metadata_dir_files(t) == needed_files(t, static)
    assert_view_matches(t)


def test_added_and_widened_and_renamed_columns(cat: tablestore.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("n", pa.int32())])
    t = cat.create_table("db.t", schema=schema, primary_key=["id"], options=DV)
    t.write(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "n": [1, 2, 3]}, schema=schema))
    t = cat.alter_table("db.t", add_columns=[pa.field("w", pa.int64())], alter_column_types={"n": pa.int64()})
    t.write(pa.table({"id": [2, 4], "name": ["B", "d"], "n": [20, 2**40], "w": [7, 8]}, schema=t.schema))
    t = cat.rename_column("db.t", "name", "label")
    t.write(pa.table({"id": [5], "label": ["e"], "n": [5], "w": [9]}, schema=t.schema))
    assert_view_matches(t)
    static = view(t)
    assert [f.name for f in static.schema().fields] == ["id", "label", "n", "w"]
    assert str(static.schema().find_field("n").field_type) == "long"
    mapping = json.loads(static.properties["schema.name-mapping.default"])
    by_id = {m["field-id"]: m["names"] for m in mapping}
    assert by_id[static.schema().find_field("label").field_id] == ["label", "name"]
    for sid in range(1, t.latest_snapshot_id() + 1):  # type: ignore[operator]
        assert_view_matches(t, sid)


def test_a_name_reused_by_another_column_stops_publishing(cat: tablestore.Catalog,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(5), 1))
    t = cat.drop_column("db.t", "v")
    t = cat.alter_table("db.t", add_columns=[pa.field("v", pa.float64())])
    with caplog.at_level(logging.ERROR):
        t.write(rows(range(5, 8), 2, t.schema))
    assert "used by two columns" in caplog.text
    assert t.read().num_rows == 8                  # the commit is unaffected
    assert max(metadata_files(t)) == 1


@settings(max_examples=int(os.environ.get("ICEBERG_VIEW_EXAMPLES", "25")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.integers(0, 60), min_size=1, max_size=25)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 60), min_size=1, max_size=10)),
    st.tuples(st.just("compact"), st.booleans()),
    st.tuples(st.just("expire"), st.integers(1, 3)),
    st.tuples(st.just("add_column"), st.just(0)),
), min_size=1, max_size=12), dv=st.booleans())
def test_random_histories_read_the_same_through_iceberg(tmp_path_factory: pytest.TempPathFactory,
                                                        ops: list[tuple[str, Any]], dv: bool) -> None:
    cat = tablestore.Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV if dv else ICEBERG)
    added = False
    for version, (op, arg) in enumerate(ops, start=1):
        if op == "upsert":
            t.write(rows(sorted(set(arg)), version, t.schema))
        elif op == "delete":
            t.write(deletes(sorted(set(arg))))
        elif op == "compact":
            t.compact(full=arg)
        elif op == "expire":
            t.expire_snapshots(retain_last=arg)
        elif not added:
            t = cat.alter_table("db.t", add_columns=[pa.field("w", pa.int64())])
            added = True
    t.write(rows([1000], 99, t.schema))            # a last commit publishes (and drops what expiry removed)
    static = view(t)
    existing = [s.id for s in t.snapshots()]
    assert [s.snapshot_id for s in static.metadata.snapshots] == existing
    assert metadata_dir_files(t) == needed_files(t, static)   # the dropped snapshots' files are gone
    if dv:
        for sid in existing:
            assert_view_matches(t, sid)
    else:  # without vectors a bucket lags until it is one run again: never a key twice; exact once compacted
        for sid in existing:
            ids = static.scan(snapshot_id=sid).to_arrow().column("id").to_pylist()
            assert len(ids) == len(set(ids))
        t.compact(full=True)
        assert_view_matches(t)


def test_metadata_json_is_spec_shaped(cat: tablestore.Catalog, tmp_path: Path) -> None:
    import catalog

    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(10), 1))
    meta = json.loads(metadata_files(t)[1].read_text())
    assert meta["format-version"] == 3 and meta["current-snapshot-id"] == 1
    assert meta["location"] == "file://" + str(Path(t.path).resolve())
    store = catalog.Catalog(str(tmp_path)).get_table("db.t").store
    assert [f["id"] for f in meta["schemas"][0]["fields"]] == list(store.schema.field_ids)
    assert meta["schemas"][0]["fields"][0]["required"] is True
    mapping = json.loads(meta["properties"]["schema.name-mapping.default"])
    assert {n for m in mapping for n in m["names"]} >= {"id", "name", "v", "_SEQUENCE_NUMBER", "_VALUE_KIND"}
    manifest_list = meta["snapshots"][0]["manifest-list"].removeprefix("file://")
    with open(manifest_list, "rb") as f:
        reader = fastavro.reader(f)
        writer_schema: Any = reader.writer_schema
        ids = {x["name"]: x["field-id"] for x in writer_schema["fields"]}
        assert ids["manifest_path"] == 500 and ids["sequence_number"] == 515
        assert reader.metadata["snapshot-id"] == "1" and reader.metadata["format-version"] == "3"


def test_a_racing_publisher_that_loses_stops_and_leaves_no_files(cat: tablestore.Catalog,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Two publishers of the same snapshot: the exclusive create of `v<N>.metadata.json` lets one win; the other
    (here: one that believes nothing is published yet) stops without overwriting it or leaving files behind."""
    import catalog

    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(10), 1))
    t.write(rows(range(5), 2))
    before = {p.name: p.read_bytes() for p in (Path(t.path) / "metadata").iterdir()}
    store = catalog.Catalog(str(Path(t.path).parent.parent)).get_table("db.t").store
    live = store.context.live_files(store.snapshots.latest())
    monkeypatch.setattr(iceberg, "latest_version", lambda context: 1)   # stale: it missed version 2
    iceberg_state.cache.clear()
    iceberg.publish(store.context, live)
    after = {p.name: p.read_bytes() for p in (Path(t.path) / "metadata").iterdir()}
    assert after == before
    assert_view_matches(t)


def test_a_table_without_primary_key_publishes_buckets_whose_rows_count_one(cat: tablestore.Catalog) -> None:
    """A row written twice in one write is one record counting two rows: Iceberg cannot say so, so its bucket
    stays at what was last published (here: nothing), while other buckets publish."""
    schema = pa.schema([("p", pa.string()), ("x", pa.int64())])
    t = cat.create_table("db.p", schema=schema, partition_by=["p"], options={**ICEBERG, "bucket": "1"})
    t.write(pa.table({"p": ["a", "a", "b"], "x": [1, 1, 2]}, schema=schema))
    got = view(t).scan().to_arrow()
    assert got.to_pylist() == [{"p": "b", "x": 2}]
    t.write(pa.table({"p": ["b"], "x": [2]}, schema=schema))              # the same row again: two records
    assert sorted(view(t).scan().to_arrow().column("x").to_pylist()) == [2, 2]


@pytest.mark.s3
def test_an_s3_table_names_its_files_by_s3_uri(s3_warehouse: str, s3_server: Any) -> None:
    cat = tablestore.Catalog(s3_warehouse, s3_server.catalog_options())
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(20), 1))
    t.write(rows(range(5), 2))
    fs = s3_server.fs()
    root = s3_warehouse.removeprefix("s3://") + "/db.db/t"
    meta = json.loads(fs.cat_file(f"{root}/metadata/v2.metadata.json"))
    assert meta["location"] == f"s3://{root}"
    static = pyiceberg_table.StaticTable.from_metadata(f"s3://{root}/metadata/v2.metadata.json", properties={
        "s3.endpoint": s3_server.endpoint, "s3.access-key-id": s3_server.access_key,
        "s3.secret-access-key": s3_server.secret_key, "s3.region": "us-east-1", "s3.force-virtual-addressing": False})
    got = static.scan().to_arrow()
    assert normalized(got, SCHEMA.names) == normalized(t.read(), SCHEMA.names)


def test_orphan_removal_keeps_the_view(cat: tablestore.Catalog) -> None:
    import datetime as dt

    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(10), 1))
    t.write(rows(range(5), 2))
    t.remove_orphan_files(older_than=dt.timedelta(0))
    assert_view_matches(t)


def _duckdb_with_iceberg() -> Any:
    return connect_with("avro", "iceberg")


def test_duckdb_reads_the_view(cat: tablestore.Catalog) -> None:
    con = _duckdb_with_iceberg()
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("p", pa.string(), nullable=False),
                        ("name", pa.string()), ("n", pa.int32())])
    t = cat.create_table("db.t", schema=schema, primary_key=["id", "p"], partition_by=["p"], options=DV)
    t.write(pa.table({"id": [1, 2, 3, 5], "p": ["a", "a", "b", "b"], "name": ["x", "y", "z", "v"],
                      "n": [1, 2, 3, 5]}, schema=schema))
    t = cat.alter_table("db.t", add_columns=[pa.field("w", pa.int64())], alter_column_types={"n": pa.int64()})
    t = cat.rename_column("db.t", "name", "label")
    t.write(pa.table({"id": [2, 4], "p": ["a", "b"], "label": ["Y", "q"], "n": [20, 2**40], "w": [7, 8]},
                     schema=t.schema))
    t.write(pa.table({"id": [5], "p": ["b"], "label": [None], "n": [None], "w": [None], "_row_kind": ["-D"]}))
    files = metadata_files(t)
    for sid, path in files.items():
        got = con.sql(f"SELECT * FROM iceberg_scan('{path}')").arrow()
        got = got.read_all() if hasattr(got, "read_all") else got
        want = t.read(snapshot_id=sid)
        columns = [c for c in want.column_names if c in got.column_names]
        assert normalized(got, columns) == normalized(want, columns)
