"""The Delta Lake view (filestore.views.delta): delta-rs reads every published version exactly as the table reads the
snapshot it publishes (user columns, sorted), with deletion vectors, compactions, expiry, an added column,
partitions with a null value, a failed publish caught up at the next commit, expired snapshots skipped, checkpoints
(and a log cut before one), refusals that never fail a commit, a primary-key table without deletion vectors lagging
until compaction, and a table without a primary key (exact, except that a row written n times reads once)."""
from __future__ import annotations

import datetime as dt
import decimal
import json
import logging
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
from duckdb_ext import connect_with
from dv_tables import SCHEMA, deletes, normalized, rows, write_history
from filestore.views import delta

deltalake = pytest.importorskip("deltalake")

VIEW = {"metadata.delta.enabled": "true", "log.system": "none", "bucket": "2"}
DV = {**VIEW, "deletion-vectors.enabled": "true"}


def log_dir(table: tablestore.Table) -> Path:
    return Path(table.path) / "_delta_log"


def versions(table: tablestore.Table) -> list[int]:
    return sorted(int(m.group(1)) for p in log_dir(table).glob("*.json")
                  if (m := re.fullmatch(r"(\d{20})\.json", p.name)))


def actions(table: tablestore.Table, version: int) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (log_dir(table) / f"{version:020d}.json").read_text().splitlines()]


def delta_read(table: tablestore.Table, version: int | None = None) -> pa.Table:
    dt = deltalake.DeltaTable(table.path, version=version)
    return pa.RecordBatchReader.from_stream(dt.scan()).read_all()


def assert_view_matches(table: tablestore.Table, snapshot_id: int | None = None, *, all_columns: bool = True) -> None:
    """Delta's read of the version of `snapshot_id` (default: the latest) is the table's read of that snapshot;
    `all_columns`: and the latest has every column of the table (false: a column added since the last commit is
    not in the view until the next one)."""
    want = table.read(snapshot_id=snapshot_id)
    got = delta_read(table, None if snapshot_id is None else delta.delta_version(snapshot_id))
    columns = [c for c in table.schema.names if c in got.column_names and c in want.column_names]
    if snapshot_id is None and all_columns:
        assert columns == table.schema.names
    assert not {"_SEQUENCE_NUMBER", "_VALUE_KIND", "_VALUE_COUNT"} & set(got.column_names)
    assert normalized(got, columns) == normalized(want, columns)


def test_versions_map_to_snapshots_with_vectors_and_time_travel(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    write_history(t, final_compaction=True)
    latest = t.latest_snapshot_id()
    assert latest is not None and versions(t) == list(range(latest))
    for sid in range(1, latest + 1):
        assert_view_matches(t, sid)
        info = actions(t, sid - 1)[0]["commitInfo"]
        assert info["tablestore.snapshotId"] == sid
    assert_view_matches(t)
    first = actions(t, 0)
    protocol = next(a["protocol"] for a in first if "protocol" in a)
    assert protocol == {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                        "writerFeatures": ["deletionVectors", "invariants"]}
    meta = next(a["metaData"] for a in first if "metaData" in a)
    assert meta["configuration"]["delta.enableDeletionVectors"] == "true" and meta["partitionColumns"] == []
    assert [f["name"] for f in json.loads(meta["schemaString"])["fields"]] == ["id", "name", "v"]
    # a vector changed: the file removed with its old vector and added with the new one, in one version
    third = actions(t, 2)
    removed = {a["remove"]["path"] for a in third if "remove" in a}
    added = {a["add"]["path"]: a["add"] for a in third if "add" in a}
    assert removed and removed <= set(added) and all("deletionVector" in added[p] for p in removed)
    stats = json.loads(next(iter(added.values()))["stats"])
    assert stats["tightBounds"] is False and stats["numRecords"] > 0 and "id" in stats["minValues"]
    # the full compaction changes no row: its actions say so
    last = actions(t, latest - 1)
    assert last[0]["commitInfo"]["operation"] == "OPTIMIZE"
    assert all(a[k]["dataChange"] is False for a in last for k in ("add", "remove") if k in a)
    assert deltalake.DeltaTable(t.path).version() == latest - 1


STEP = st.one_of(
    st.tuples(st.just("upsert"), st.lists(st.integers(0, 40), min_size=1, max_size=25)),
    st.tuples(st.just("delete"), st.lists(st.integers(0, 40), min_size=1, max_size=10)),
    st.tuples(st.just("compact"), st.booleans()),
    st.tuples(st.just("expire"), st.integers(1, 4)),
    st.tuples(st.just("add_column"), st.none()),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEP, min_size=1, max_size=8))
def test_random_histories_read_the_same_in_delta_rs(tmp_path_factory: pytest.TempPathFactory,
                                                    steps: list[tuple[str, Any]]) -> None:
    cat = tablestore.Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    schema = SCHEMA
    for n, (kind, arg) in enumerate(steps):
        if kind == "upsert":
            t.write(rows(sorted(set(arg)), n, schema))
        elif kind == "delete":
            t.write(deletes(sorted(set(arg)), schema))
        elif kind == "compact":
            t.compact(full=arg)
        elif kind == "expire":
            t.expire_snapshots(retain_last=arg)
        elif "w" not in schema.names:
            t = cat.alter_table("db.t", add_columns=[pa.field("w", pa.int64())])
            schema = t.schema
        latest = t.latest_snapshot_id()
        if latest is None:
            assert not log_dir(t).exists()
            continue
        assert versions(t)[-1] == delta.delta_version(latest)
        assert_view_matches(t, all_columns=False)
        retained = [sid for sid in range(1, latest + 1) if (Path(t.path) / "snapshot" / f"snapshot-{sid}").exists()]
        for sid in retained[-3:]:
            assert_view_matches(t, sid)


def test_partitions_with_a_null_value_and_special_characters(cat: tablestore.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("v", pa.float64()),
                        ("p", pa.string()), ("d", pa.date32())])
    ps = ["a", None, "x y:%z", "__DEFAULT_PARTITION__"]
    day = dt.date(2024, 2, 29)
    ids = list(range(12))
    p_of = [ps[i % 4] for i in ids]
    d_of = [day if i % 3 else None for i in ids]
    # a table without a primary key (partition values may be null)
    t = cat.create_table("db.t", schema=schema, partition_by=["p", "d"], options={**VIEW, "bucket": "1"})
    t.write(rows(ids, 1, schema, p=p_of, d=d_of))
    t.write(rows([20, 21], 2, schema, p=[None, "a"], d=[None, day]))
    assert_view_matches(t)
    assert_view_matches(t, 1)
    values = {json.dumps(a["add"]["partitionValues"], sort_keys=True) for a in actions(t, 0) if "add" in a}
    assert values == {json.dumps({"d": d and d.isoformat(), "p": p}, sort_keys=True) for p, d in zip(p_of, d_of)}
    meta = next(a["metaData"] for a in actions(t, 0) if "metaData" in a)
    assert meta["partitionColumns"] == ["p", "d"]
    assert normalized(delta_read(t), ["id", "p", "d"]) == normalized(t.read(), ["id", "p", "d"])
    # a primary-key table with vectors, partitioned by values that need escaping
    schema = pa.schema([*(schema.field(n) for n in ("id", "name", "v")), pa.field("p", pa.string(), False)])
    k = cat.create_table("db.k", schema=schema, primary_key=["id", "p"], partition_by=["p"], options=DV)
    keys = ["a", "x y:%z", "__DEFAULT_PARTITION__", "é/=#"]
    k.write(rows(ids, 1, schema, p=[keys[i % 4] for i in ids]))
    k.write(deletes([0, 1, 2, 3], schema, p=keys))
    k.write(rows([5, 6], 2, schema, p=[keys[1], keys[2]]))
    for sid in (1, 2, 3):
        assert_view_matches(k, sid)


def test_a_failed_publish_is_caught_up_by_the_next_commit(cat: tablestore.Catalog,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(10), 1))
    real = delta._target
    calls = {"n": 0}

    def fail_once(*args: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk went away")
        return real(*args)

    monkeypatch.setattr(delta, "_target", fail_once)
    with caplog.at_level(logging.WARNING):
        t.write(rows(range(5, 15), 2))  # the commit succeeds, its Delta version does not
    assert t.latest_snapshot_id() == 2 and versions(t) == [0]
    assert "disk went away" in caplog.text and "Delta Lake" in caplog.text
    assert len(t.read()) == 15
    t.write(deletes([1, 2]))
    assert versions(t) == [0, 1, 2]
    for sid in (1, 2, 3):
        assert_view_matches(t, sid)
    assert_view_matches(t)


def test_snapshots_expired_before_they_were_published_get_empty_versions(cat: tablestore.Catalog,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(10), 1))
    real = delta.publish
    monkeypatch.setattr(delta, "publish", lambda context, live: None)
    t.write(rows(range(5, 15), 2))
    t.write(deletes([0, 6]))
    t.compact(full=True)
    t.expire_snapshots(retain_last=1)   # snapshots 1..3 expired, the files version 0 lists deleted
    monkeypatch.setattr(delta, "publish", real)
    t.write(rows(range(20, 25), 3))
    assert versions(t) == [0, 1, 2, 3, 4]
    assert [a for a in actions(t, 1) if "commitInfo" not in a] == []
    assert actions(t, 2)[0]["commitInfo"]["tablestore.expired"] is True
    assert_view_matches(t, 4)
    assert_view_matches(t, 5)
    assert_view_matches(t)


def test_checkpoints_every_ten_versions_and_a_log_cut_before_one(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    for i in range(12):
        t.write(rows(range(i, i + 5), i) if i % 3 else deletes([i - 1, i + 1]))
    checkpoint = log_dir(t) / f"{10:020d}.checkpoint.parquet"
    assert checkpoint.exists()
    assert json.loads((log_dir(t) / "_last_checkpoint").read_text()) == {"version": 10, "size": 2 + len(
        [p for p in deltalake.DeltaTable(t.path, version=10).file_uris()])}
    assert_view_matches(t)
    for p in log_dir(t).glob("*.json"):
        if int(p.name[:20]) < 10:
            p.unlink()
    assert_view_matches(t)
    assert_view_matches(t, 11)
    assert_view_matches(t, t.latest_snapshot_id())
    delta._cache.clear()   # the next publish replays the state from the checkpoint, not from its cache
    t.write(deletes([3, 4, 5]))
    t.write(rows(range(30, 33), 99))
    assert versions(t)[-1] == delta.delta_version(t.latest_snapshot_id())  # type: ignore[arg-type]
    assert min(versions(t)) == 10
    assert_view_matches(t)


def test_a_renamed_column_stops_the_view_not_the_commit(cat: tablestore.Catalog,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(5), 1))
    t = cat.alter_table("db.t", add_columns=[pa.field("w", pa.int64())])
    t.write(rows(range(3, 8), 2, t.schema))
    assert_view_matches(t)
    assert [f["name"] for f in json.loads(next(a["metaData"] for a in actions(t, 1) if "metaData" in a)[
        "schemaString"])["fields"]] == ["id", "name", "v", "w"]
    t = cat.rename_column("db.t", "name", "label")
    with caplog.at_level(logging.ERROR):
        t.write(pa.table({"id": [9], "label": ["x"], "v": [1.0], "w": [1]}, schema=t.schema))
    assert t.latest_snapshot_id() == 3 and versions(t) == [0, 1]
    assert "db.t" in caplog.text and "'name'" in caplog.text and "renamed" in caplog.text
    assert len(t.read()) == 9


def test_an_unsupported_column_type_is_refused_with_its_name(cat: tablestore.Catalog,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("tags", pa.list_(pa.string()))])
    t = cat.create_table("db.t", schema=schema, primary_key=["id"], options=DV)
    with caplog.at_level(logging.ERROR):
        t.write(pa.table({"id": [1], "tags": [["a"]]}, schema=schema))
    assert t.latest_snapshot_id() == 1 and not log_dir(t).exists()
    assert "db.t" in caplog.text and "'tags'" in caplog.text


def test_a_primary_key_table_without_vectors_lags_until_compaction(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={**VIEW, "bucket": "1"})
    t.write(rows(range(10), 1))
    assert_view_matches(t)  # one file: one sorted run
    t.write(rows(range(5, 15), 2))
    t.write(deletes([0, 1]))
    got = delta_read(t)  # the bucket lags: still the first snapshot's rows, never a key twice
    assert normalized(got, SCHEMA.names) == normalized(t.read(snapshot_id=1), SCHEMA.names)
    assert versions(t) == [0, 1, 2] and [a for a in actions(t, 2) if "add" in a or "remove" in a] == []
    t.compact(full=True)
    assert_view_matches(t)
    assert all("deletionVector" not in a["add"] for v in versions(t) for a in actions(t, v) if "add" in a)


def test_a_table_without_primary_key_reads_once_per_distinct_row(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, options={**VIEW, "bucket": "1"})
    t.write(rows(range(5), 1))
    t.write(rows(range(5, 8), 2))
    assert_view_matches(t)  # plain appends: exact
    t.write(deletes([0]).set_column(1, "name", pa.array(["n0-1"])).set_column(2, "v", pa.array([1.0])))
    lagging = delta_read(t)
    assert len(lagging) == 8  # the retraction's bucket lags
    t.compact(full=True)
    assert_view_matches(t)
    # the same row written twice in one write is one record of count 2: Delta readers see it once (inexact)
    t.write(pa.concat_tables([rows([50], 3), rows([50], 3)]))
    t.compact(full=True)
    assert len(t.read()) == 9 and len(delta_read(t)) == 8


def test_orphan_removal_keeps_the_log_and_a_dropped_table_leaves_nothing(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    for i in range(3):
        t.write(rows(range(i, i + 4), i))
    before = sorted(p.name for p in log_dir(t).iterdir())
    t.remove_orphan_files(older_than=10**13)
    assert sorted(p.name for p in log_dir(t).iterdir()) == before
    assert_view_matches(t)
    path = Path(t.path)
    cat.drop_table("db.t")
    assert not path.exists()


def test_a_table_without_the_option_has_no_log(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"deletion-vectors.enabled": "true",
                                                                              "log.system": "none"})
    t.write(rows(range(5), 1))
    assert not log_dir(t).exists()


def test_timestamps_without_time_zone_add_the_feature(cat: tablestore.Catalog) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("at", pa.timestamp("us")),
                        ("utc", pa.timestamp("us", tz="UTC")), ("amount", pa.decimal128(10, 2))])
    t = cat.create_table("db.t", schema=schema, primary_key=["id"], options=DV)
    t.write(pa.table({"id": [1, 2], "at": [dt.datetime(2024, 1, 2, 3, 4, 5), None],
                      "utc": [dt.datetime(2024, 1, 2, tzinfo=dt.timezone.utc), None],
                      "amount": [decimal.Decimal("1.25"), None]}, schema=schema))
    protocol = next(a["protocol"] for a in actions(t, 0) if "protocol" in a)
    assert protocol["readerFeatures"] == ["deletionVectors", "timestampNtz"]
    fields = {f["name"]: f["type"] for f in json.loads(next(a["metaData"] for a in actions(t, 0)
                                                           if "metaData" in a)["schemaString"])["fields"]}
    assert fields == {"id": "long", "at": "timestamp_ntz", "utc": "timestamp", "amount": "decimal(10,2)"}
    got = delta_read(t).sort_by("id")
    assert got.column("at").to_pylist()[0].replace(tzinfo=None) == dt.datetime(2024, 1, 2, 3, 4, 5)
    assert got.column("amount").to_pylist() == [decimal.Decimal("1.25"), None]


def test_duckdb_reads_the_view(cat: tablestore.Catalog) -> None:
    con = connect_with("delta")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(20), 1))
    t.write(deletes([1, 2, 3]))
    got = con.execute(f"SELECT id, name, v FROM delta_scan('{t.path}')").fetch_arrow_table()
    assert normalized(got, SCHEMA.names) == normalized(t.read(), SCHEMA.names)


def test_snapshots_name_their_delta_version(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(5), 1))
    t.write(rows(range(3), 2))
    assert [(s.id, s.delta_version) for s in t.snapshots()] == [(1, 0), (2, 1)]
    plain = cat.create_table("db.plain", schema=SCHEMA, primary_key=["id"], options={"log.system": "none"})
    plain.write(rows(range(5), 1))
    assert [s.delta_version for s in plain.snapshots()] == [None]


@pytest.mark.s3
def test_delta_rs_reads_a_table_on_s3(s3_warehouse: str, s3_server: Any) -> None:
    import deltalake

    c = tablestore.Catalog(s3_warehouse, s3_server.catalog_options())
    c.create_database("db")
    t = c.create_table("db.t", schema=SCHEMA, primary_key=["id"], options=DV)
    t.write(rows(range(40), 1))
    t.write(rows(range(0, 40, 3), 2))
    t.write(deletes([1, 2]))
    storage = {"AWS_ENDPOINT_URL": s3_server.endpoint, "AWS_ACCESS_KEY_ID": s3_server.access_key,
               "AWS_SECRET_ACCESS_KEY": s3_server.secret_key, "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    path = f"{s3_warehouse}/db.db/t"
    for version, sid in ((None, None), (1, 2)):
        table = deltalake.DeltaTable(path, storage_options=storage, version=version)
        got = pa.RecordBatchReader.from_stream(table.scan()).read_all()
        assert normalized(got, SCHEMA.names) == normalized(t.read(snapshot_id=sid), SCHEMA.names)
