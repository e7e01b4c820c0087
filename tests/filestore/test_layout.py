"""What a table looks like on disk: directories, data files, manifests and snapshots, read with plain pyarrow,
fastavro and json, as a user (or another engine) would; and how the writer shapes sorted runs and files."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

import catalog
import tablestore
from filestore.keycodec import KeyCodec

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.string())])
SYSTEM = ["_SEQUENCE_NUMBER", "_VALUE_KIND"]


def new_table(tmp_path: Path, *, pk: bool = True, options: dict[str, str] | None = None,
              schema: pa.Schema = SCHEMA, partition_by: list[str] | None = None) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(
        "db.t", schema=schema, primary_key=(["id", "dt"] if pk else None),
        partition_by=["dt"] if partition_by is None else partition_by,
        options={"write-only": "true", **(options or {})},
    )


def rows(n: int, dt: str = "2024-01-01", start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table({"id": ids, "dt": [dt] * n, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def data_files(table_dir: Path) -> list[Path]:
    return sorted(p for p in table_dir.rglob("data-*") if p.is_file())


def snapshot_json(t: tablestore.Table, sid: int) -> dict[str, Any]:
    return json.loads((Path(t.path) / "snapshot" / f"snapshot-{sid}").read_bytes())


def avro(path: Path) -> list[dict[str, Any]]:
    with path.open("rb") as f:
        return list(fastavro.reader(f))  # type: ignore[arg-type]


def delta_entries(t: tablestore.Table, sid: int) -> list[dict[str, Any]]:
    manifest_dir = Path(t.path) / "manifest"
    listed = avro(manifest_dir / snapshot_json(t, sid)["deltaManifestList"])
    return [e for m in listed for e in avro(manifest_dir / m["_FILE_NAME"])]


# -- directories -----------------------------------------------------------------------------------------------
def test_hive_partition_and_bucket_directories(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"bucket": "3"})
    t.write(pa.concat_tables([rows(50, "2024-01-01"), rows(50, "2024-01-02")]))
    root = Path(t.path)
    assert root == tmp_path / "db.db" / "t"
    children = {p.name for p in root.iterdir()}
    assert {"schema", "snapshot", "manifest", "dt=2024-01-01", "dt=2024-01-02"} == children
    assert (root / "schema" / "schema-0").is_file()
    assert (root / "snapshot" / "snapshot-1").is_file()
    for part in ("dt=2024-01-01", "dt=2024-01-02"):
        buckets = {p.name for p in (root / part).iterdir()}
        assert buckets <= {"bucket-0", "bucket-1", "bucket-2"} and len(buckets) >= 2
    # every row sits in the partition its directory names
    for f in data_files(root):
        dt_value = f.parent.parent.name.split("=", 1)[1]
        assert set(pq.read_table(f).column("dt").to_pylist()) == {dt_value}
    assert all(p.suffix == ".avro" for p in (root / "manifest").iterdir())


def test_partition_values_are_escaped_and_nulls_use_the_default_partition(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("dt", pa.string())])
    t = new_table(tmp_path, pk=False, schema=schema)
    t.write(pa.table({"id": [1, 2, 3], "dt": ["a/b=c", None, "x%y"]}, schema=schema))
    names = {p.name for p in Path(t.path).iterdir() if p.name.startswith("dt=")}
    assert names == {"dt=a%2Fb%3Dc", "dt=__DEFAULT_PARTITION__", "dt=x%25y"}
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "dt": "a/b=c"}, {"id": 2, "dt": None}, {"id": 3, "dt": "x%y"}
    ]


# -- data files ------------------------------------------------------------------------------------------------
def test_data_files_are_parquet_with_system_and_row_columns(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    t.write(pa.table({"id": [3, 1, 2], "dt": ["d"] * 3, "v": ["c", "a", "b"]}, schema=SCHEMA))
    t.write(pa.table({"id": [2], "dt": ["d"], "v": [None], "_row_kind": ["-D"]}))
    files = data_files(Path(t.path))
    assert len(files) == 2 and all(f.suffix == ".parquet" for f in files)
    tables = sorted((pq.read_table(f) for f in files), key=lambda x: x.num_rows)
    deletes, inserts = tables
    assert inserts.schema.names == [*SYSTEM, "id", "dt", "v"]
    assert inserts.column("id").to_pylist() == [1, 2, 3]  # sorted by key
    assert inserts.column("_VALUE_KIND").to_pylist() == [0, 0, 0]
    assert len(set(inserts.column("_SEQUENCE_NUMBER").to_pylist())) == 3
    assert deletes.column("id").to_pylist() == [2] and deletes.column("_VALUE_KIND").to_pylist() == [1]
    assert deletes.column("_SEQUENCE_NUMBER")[0].as_py() > max(inserts.column("_SEQUENCE_NUMBER").to_pylist())
    assert sorted(t.read().column("id").to_pylist()) == [1, 3]


def test_tables_without_primary_key_store_a_count(tmp_path: Path) -> None:
    t = new_table(tmp_path, pk=False)
    t.write(pa.table({"id": [1, 1, 2], "dt": ["d"] * 3, "v": ["a", "a", "b"]}, schema=SCHEMA))
    (f,) = data_files(Path(t.path))
    stored = pq.read_table(f)
    assert stored.schema.names == [*SYSTEM, "_VALUE_COUNT", "id", "dt", "v"]
    assert stored.select(["id", "v", "_VALUE_COUNT"]).to_pylist() == [
        {"id": 1, "v": "a", "_VALUE_COUNT": 2}, {"id": 2, "v": "b", "_VALUE_COUNT": 1}
    ]


def test_orc_format_option(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"file.format": "orc"})
    t.write(rows(10))
    files = data_files(Path(t.path))
    assert files and all(f.suffix == ".orc" for f in files)
    stored = orc.read_table(str(files[0]))
    assert stored.schema.names == [*SYSTEM, "id", "dt", "v"]
    assert t.read().sort_by("id").equals(rows(10))


# -- manifests -------------------------------------------------------------------------------------------------
def test_manifests_are_avro_describing_each_data_file(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"bucket": "2"})
    sid = t.write(pa.concat_tables([rows(20, "2024-01-01"), rows(5, "2024-01-02", start=100)]))
    assert sid is not None
    entries = delta_entries(t, sid)
    files = data_files(Path(t.path))
    assert len(entries) == len(files)
    codec = KeyCodec([pa.int64(), pa.string()])
    for e in entries:
        assert e["_KIND"] == 0  # added
        f = e["_FILE"]
        path = Path(t.path) / f"dt={e['_PARTITION'][0]}" / f"bucket-{e['_BUCKET']}" / f["_FILE_NAME"]
        assert path.stat().st_size == f["_FILE_SIZE"]
        stored = pq.read_table(path)
        assert stored.num_rows == f["_ROW_COUNT"]
        seqs = stored.column("_SEQUENCE_NUMBER").to_pylist()
        assert (f["_MIN_SEQUENCE_NUMBER"], f["_MAX_SEQUENCE_NUMBER"]) == (min(seqs), max(seqs))
        keys = list(zip(stored.column("id").to_pylist(), stored.column("dt").to_pylist()))
        assert f["_MIN_KEY"] == codec.encode(list(min(keys))) and f["_MAX_KEY"] == codec.encode(list(max(keys)))
        assert f["_LEVEL"] == 0 and f["_SCHEMA_ID"] == 0 and e["_TOTAL_BUCKETS"] == 2
        stats = {s["_COLUMN"]: s for s in f["_VALUE_STATS"]}
        assert set(stats) == {"id", "dt", "v"}
        assert stats["v"]["_NULL_COUNT"] == 0
        assert stats["id"]["_MIN"] is not None and stats["id"]["_MIN"] <= stats["id"]["_MAX"]

    # an overwrite lists the files it removes as deleted entries
    before = {e["_FILE"]["_FILE_NAME"] for e in entries}
    sid2 = t.write(rows(3, "2024-01-01"), overwrite={"dt": "2024-01-01"})
    assert sid2 is not None
    kinds: dict[int, set[str]] = {0: set(), 1: set()}
    for e in delta_entries(t, sid2):
        kinds[e["_KIND"]].add(e["_FILE"]["_FILE_NAME"])
        if e["_KIND"] == 1:
            assert e["_PARTITION"] == ["2024-01-01"]
    assert kinds[1] and kinds[1] <= before and not kinds[0] & before


def test_manifest_list_names_manifests_with_counts(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    t.write(rows(5))
    sid = t.write(rows(2), overwrite=True)
    assert sid is not None
    manifest_dir = Path(t.path) / "manifest"
    snap = snapshot_json(t, sid)
    base, delta = avro(manifest_dir / snap["baseManifestList"]), avro(manifest_dir / snap["deltaManifestList"])
    assert len(delta) == 1 and (delta[0]["_NUM_ADDED_FILES"], delta[0]["_NUM_DELETED_FILES"]) == (1, 1)
    assert [m["_NUM_ADDED_FILES"] for m in base] == [1]
    for m in base + delta:
        assert (manifest_dir / m["_FILE_NAME"]).stat().st_size == m["_FILE_SIZE"]


# -- snapshots -------------------------------------------------------------------------------------------------
def test_snapshot_json_fields_and_kinds(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    s1 = t.write(rows(4))
    s2 = t.write(rows(3, start=10))
    s3 = t.compact(full=True)
    s4 = t.write(rows(2, start=20), overwrite=True)
    handle = catalog.Catalog(str(tmp_path)).get_table("db.t")
    w = handle.store.new_write()
    w.write(rows(1, start=30))
    s5 = handle.store.new_commit("log-job").commit(w.prepare_commit(), identifier=77, log_offsets={0: 12, 1: 3})
    s6 = handle.store.new_commit("log-job").commit([], identifier=78, log_offsets={1: 9})
    assert [s1, s2, s3, s4, s5, s6] == [1, 2, 3, 4, 5, 6]

    snaps = [snapshot_json(t, i) for i in range(1, 7)]
    required = {"id", "schemaId", "baseManifestList", "deltaManifestList", "commitUser", "commitIdentifier",
                "commitKind", "timeMillis", "totalRecordCount", "deltaRecordCount", "logOffsets"}
    for i, s in enumerate(snaps, start=1):
        assert required <= set(s) and s["id"] == i and s["schemaId"] == 0
    assert [s["commitKind"] for s in snaps] == ["APPEND", "APPEND", "COMPACT", "OVERWRITE", "APPEND", "APPEND"]
    assert [s["totalRecordCount"] for s in snaps[:2]] == [4, 7]
    assert [s["deltaRecordCount"] for s in snaps[:2]] == [4, 3]
    assert snaps[3]["totalRecordCount"] == 2
    assert (snaps[4]["commitUser"], snaps[4]["commitIdentifier"]) == ("log-job", 77)
    assert snaps[4]["logOffsets"] == {"0": 12, "1": 3}
    assert snaps[5]["logOffsets"] == {"0": 12, "1": 9}
    times = [s["timeMillis"] for s in snaps]
    assert times == sorted(times)
    assert snaps[0]["commitUser"] == snaps[1]["commitUser"]
    assert (snaps[0]["commitIdentifier"], snaps[1]["commitIdentifier"]) == (1, 2)

    info = t.snapshots()
    assert [(s.id, s.kind, s.total_record_count, s.delta_record_count, s.time_millis) for s in info] == [
        (s["id"], s["commitKind"], s["totalRecordCount"], s["deltaRecordCount"], s["timeMillis"]) for s in snaps
    ]
    assert info[4].log_offsets == {0: 12, 1: 3}


def test_schema_file_is_versioned_json(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"bucket": "2"})
    schema = json.loads((Path(t.path) / "schema" / "schema-0").read_bytes())
    assert schema["id"] == 0
    assert [f["name"] for f in schema["fields"]] == ["id", "dt", "v"]
    assert schema["primaryKeys"] == ["id", "dt"] and schema["partitionKeys"] == ["dt"]
    assert schema["options"]["bucket"] == "2"


# -- the writer: sorted runs and file rolling ------------------------------------------------------------------
def _level0_files(t: tablestore.Table, sid: int) -> list[dict[str, Any]]:
    return [e["_FILE"] for e in delta_entries(t, sid) if e["_KIND"] == 0 and e["_FILE"]["_LEVEL"] == 0]


def test_flushes_within_one_commit_become_separate_sorted_runs(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"write-buffer-size": "1 kb"})
    store = catalog.Catalog(str(tmp_path)).get_table("db.t").store
    w = store.new_write()
    for chunk in range(4):  # every chunk is larger than the buffer: each becomes a flush
        w.write(pa.table({"id": list(range(chunk, 200, 2)), "dt": ["d"] * len(range(chunk, 200, 2)),
                          "v": [f"c{chunk}"] * len(range(chunk, 200, 2))}, schema=SCHEMA))
    sid = store.new_commit("u").commit(w.prepare_commit(), identifier=1)
    assert sid is not None
    files = _level0_files(t, sid)
    assert len(files) >= 4  # every chunk is over the buffer, so it flushes at least once
    ranges = sorted((f["_MIN_SEQUENCE_NUMBER"], f["_MAX_SEQUENCE_NUMBER"]) for f in files)
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:]))  # runs in flush order
    for f in data_files(Path(t.path)):
        ids = pq.read_table(f).column("id").to_pylist()
        assert ids == sorted(ids)
    got = {r["id"]: r["v"] for r in t.read().to_pylist()}
    assert got == {i: f"c{i % 2 + (2 if i >= 2 else 0)}" for i in range(200)}


def test_small_write_buffer_forces_several_runs_in_one_table_write(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"write-buffer-size": "4 kb"})
    sid = t.write(rows(3000))
    assert sid is not None
    assert len(_level0_files(t, sid)) > 1
    assert t.read().sort_by("id").equals(rows(3000))


def test_target_file_size_rolls_a_run_into_disjoint_files(tmp_path: Path) -> None:
    t = new_table(tmp_path, options={"target-file-size": "8 kb"})
    data = rows(3000)
    sid = t.write(data.take(pa.array(list(reversed(range(3000))))))
    assert sid is not None
    files = sorted(_level0_files(t, sid), key=lambda f: f["_MIN_KEY"])
    assert len(files) > 3
    assert sum(f["_ROW_COUNT"] for f in files) == 3000
    for a, b in zip(files, files[1:]):
        assert a["_MAX_KEY"] < b["_MIN_KEY"]  # one sorted run: key ranges do not overlap
    assert t.read().sort_by("id").equals(data)


def test_a_flush_writes_its_run_a_row_group_at_a_time(tmp_path: Path, monkeypatch: Any) -> None:
    """A flush takes its run from the written rows one row group at a time: each file holds its bucket's newest
    row per key in key order, in row groups of ROW_GROUP_ROWS rows, and reads back as the rows written."""
    import numpy as np

    from filestore import datafile

    monkeypatch.setattr(datafile, "ROW_GROUP_ROWS", 7)
    t = new_table(tmp_path, options={"bucket": "2"})
    ids = np.random.default_rng(1).integers(0, 300, 1000)  # unsorted, with repeats: the last write of a key wins
    t.write(pa.table({"id": ids, "dt": ["2024-01-01"] * 1000, "v": [f"v{i}" for i in range(1000)]}, schema=SCHEMA))
    newest = {int(k): f"v{i}" for i, k in enumerate(ids)}
    files = data_files(Path(t.path))
    assert len(files) == 2
    for path in files:
        content = pq.read_table(path)
        keys = content["id"].to_pylist()
        assert keys == sorted(set(keys))
        assert content["v"].to_pylist() == [newest[k] for k in keys]
        assert pq.ParquetFile(path).metadata.num_row_groups == -(-content.num_rows // 7)
    back = t.read()
    assert dict(zip(back["id"].to_pylist(), back["v"].to_pylist())) == newest


def test_a_large_input_in_many_chunks_is_written_as_given(tmp_path: Path) -> None:
    """A large input of several Arrow chunks (as a Parquet reader returns) is combined once before the flushes take
    from it: the table holds exactly its rows."""
    import numpy as np

    t = new_table(tmp_path, options={"bucket": "2", "write-buffer-size": "1 mb"})
    n = 70_000
    ids = np.random.default_rng(2).permutation(n)
    whole = pa.table({"id": ids, "dt": ["2024-01-01"] * n, "v": [f"v{i}" for i in ids]}, schema=SCHEMA)
    chunked = pa.concat_tables([whole.slice(s, 9_999) for s in range(0, n, 9_999)])
    assert chunked["v"].num_chunks > 1
    t.write(chunked)
    back = t.read()
    assert back.num_rows == n
    assert back.sort_by("id").equals(whole.sort_by("id"))


def test_a_write_for_one_bucket_files_its_rows_there_and_refuses_rows_of_another(tmp_path: Path) -> None:
    """`FileStoreWrite(..., bucket=b)`: the caller clustered the rows by the table's bucket (a Spark write task per
    bucket), so they are not hashed again; a sample is, and a row of another bucket fails the write."""
    from filestore import BucketMismatchError, FileStoreWrite, bucket_of

    t = new_table(tmp_path, options={"bucket": "2"}, partition_by=[])
    store = catalog.Catalog(str(tmp_path)).get_table("db.t").store
    data = rows(200)
    buckets = bucket_of(data, ["id", "dt"], 2)
    ones = data.filter(pa.array(buckets == 1))
    w = FileStoreWrite(store.context, {}, bucket=1)
    assert (w.write(ones) == 1).all()
    messages = w.prepare_commit()
    assert [m.bucket for m in messages] == [1]
    store.new_commit("u").commit(messages, identifier=1)
    assert sorted(t.read().column("id").to_pylist()) == sorted(ones.column("id").to_pylist())
    with pytest.raises(BucketMismatchError, match=r"table 'db\.t': a write for bucket 1 was given rows of bucket 0"):
        FileStoreWrite(store.context, {}, bucket=1).write(data)
