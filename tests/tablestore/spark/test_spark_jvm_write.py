"""The JVM writer of a Spark batch write (tablestore/spark/jvm_write.py, BucketRunWriter.java) against the Python
writer (tablestore/spark/write.py, the reference): the same DataFrames (random rows, duplicate keys within a task,
nulls, NaN and -0.0, every column type the JVM writer writes) written both ways give the same table, the same
files (one run per bucket: the same records with the same sequence numbers, the same metadata; several runs when
the write buffer is small), which the Python reader and Spark's raw-split read both read. The writes it does not
apply to still go through Python, and a failed JVM write leaves no file behind."""
from __future__ import annotations

import dataclasses
import datetime as dt
import glob
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import tablestore

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("flag", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()),
                    ("i32", pa.int32()), ("i64", pa.int64()), ("f32", pa.float32()), ("f64", pa.float64()),
                    ("day", pa.date32()), ("s", pa.string()), ("bin", pa.binary())])


def _rows(n: int, key_space: int, seed: int) -> pa.Table:
    """Random rows of SCHEMA: keys repeat (within a task too), a tenth of each value column null."""
    rng = np.random.default_rng(seed)

    def nulls(values: list[Any]) -> list[Any]:
        return [None if rng.random() < 0.1 else v for v in values]

    floats = [0.0, -0.0, math.nan, math.inf, 1.5, -2.25]
    return pa.table({
        "id": pa.array(rng.integers(-key_space, key_space, n), pa.int64()),
        "flag": pa.array(nulls(list(rng.random(n) < 0.5)), pa.bool_()),
        "i8": pa.array(nulls(rng.integers(-128, 128, n).tolist()), pa.int8()),
        "i16": pa.array(nulls(rng.integers(-(2**15), 2**15, n).tolist()), pa.int16()),
        "i32": pa.array(nulls(rng.integers(-(2**31), 2**31, n).tolist()), pa.int32()),
        "i64": pa.array(nulls(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64).tolist()), pa.int64()),
        "f32": pa.array(nulls([floats[i] for i in rng.integers(0, len(floats), n)]), pa.float32()),
        "f64": pa.array(nulls([floats[i] if i < len(floats) else rng.random() for i in rng.integers(0, 9, n)]),
                        pa.float64()),
        "day": pa.array(nulls([dt.date(2000, 1, 1) + dt.timedelta(days=int(d)) for d in rng.integers(0, 9000, n)]),
                        pa.date32()),
        "s": pa.array(nulls([f"v{k}" * int(k % 4) for k in rng.integers(0, 1000, n)]), pa.string()),
        "bin": pa.array(nulls([bytes([int(k) % 256]) * int(k % 3) for k in rng.integers(0, 1000, n)]), pa.binary()),
    }, schema=SCHEMA)


def _norm(row: dict[str, Any]) -> tuple[Any, ...]:
    """A row comparable by identity: NaN equals NaN, -0.0 differs from 0.0."""
    return tuple(repr(v) if isinstance(v, float) else v for v in row.values())


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    return sorted((_norm(r) for r in table.to_pylist()), key=lambda r: r[0])


def _frame(spark: Any, rows: pa.Table, tmp_path: Path, name: str) -> Any:
    """`rows` as a DataFrame of one input partition (a Parquet file of one row group): the rows of each bucket
    reach its write task in input order, so both writers see the same order."""
    path = tmp_path / f"{name}.parquet"
    pq.write_table(rows, path)
    return spark.read.parquet(str(path))


def _data_files(table: Any) -> list[str]:
    return sorted(glob.glob(f"{table.path}/**/data-*", recursive=True))


def _creators(table: Any) -> set[str]:
    return {pq.ParquetFile(f).metadata.created_by.split(" ")[0] for f in _data_files(table)}


def _metas(table: Any) -> dict[int, list[Any]]:
    """Per bucket, the live files' metadata in key order, without what differs between any two writes of the same
    rows (name, size, time)."""
    store = table._handle.store
    out: dict[int, list[Any]] = {}
    for e in store.live_entries(store.snapshots.latest()).values():
        out.setdefault(e.bucket, []).append(e.file)
    return {b: sorted((dataclasses.replace(f, file_name="", file_size=0, creation_time_ms=0) for f in files),
                      key=lambda f: (f.min_sequence_number, f.min_key)) for b, files in out.items()}


def _records(table: Any) -> dict[int, list[list[tuple[Any, ...]]]]:
    """Per bucket, each live file's records (system columns too), the files ordered as `_metas`."""
    store = table._handle.store
    out: dict[int, list[tuple[Any, list[tuple[Any, ...]]]]] = {}
    for e in store.live_entries(store.snapshots.latest()).values():
        rows = pq.read_table(store.data_file_path(e.partition, e.bucket, e.file.file_name)).to_pylist()
        out.setdefault(e.bucket, []).append(((e.file.min_sequence_number, e.file.min_key), [_norm(r) for r in rows]))
    return {b: [rows for _, rows in sorted(files, key=lambda f: f[0])] for b, files in out.items()}


def _expected(*writes: pa.Table) -> list[tuple[Any, ...]]:
    """The table after `writes` in order: per key, its last row (one input partition: input order wins)."""
    last: dict[int, tuple[Any, ...]] = {}
    for rows in writes:
        for r in rows.to_pylist():
            last[r["id"]] = _norm(r)
    return sorted(last.values(), key=lambda r: r[0])


@pytest.mark.parametrize("buffer", ["1 gb", "16 kb"])
def test_the_jvm_writer_writes_what_the_python_writer_writes(spark: Any, tmp_path: Path, buffer: str) -> None:
    """Two writes (the second on top of the first: sequence numbers above the committed ones, overlapping keys).
    One run per bucket ("1 gb"): the same files, record for record, with the same metadata. Several runs and files
    ("16 kb" buffer, "8 kb" files: both writers estimate a row's size, not alike to the byte): the same table."""
    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    opts = {"bucket": "2", "write-buffer-size": buffer, "target-file-size": "1 gb" if buffer == "1 gb" else "8 kb",
            "write-only": "true"}
    jvm = cat.create_table("db.jvm", SCHEMA, primary_key=["id"], options=opts)
    python = cat.create_table("db.py", SCHEMA, primary_key=["id"], options=opts)
    first, second = _rows(3000, 1000, 1), _rows(2000, 1500, 2)
    for i, rows in enumerate([first, second]):
        df = _frame(spark, rows, tmp_path, f"w{i}")
        df.write.format("managed").option("warehouse", str(wh)).mode("append").save("db.jvm")
        df.write.format("managed").option("warehouse", str(wh)).option("jvm-writer", "false").mode("append") \
            .save("db.py")
        assert _creators(jvm) == {"parquet-mr"} and _creators(python) == {"parquet-cpp-arrow"}
        expected = _expected(first, second) if i else _expected(first)
        assert _sorted(jvm.read()) == _sorted(python.read()) == expected
        spark_read = spark.read.format("managed").option("warehouse", str(wh)).load("db.jvm")
        assert sorted((_norm(r.asDict()) for r in spark_read.collect()), key=lambda r: r[0]) == expected
        if buffer == "1 gb":
            assert _metas(jvm) == _metas(python)
            assert _records(jvm) == _records(python)
        else:
            assert all(len(files) > 2 for files in _metas(jvm).values())   # several runs and files per bucket
            py_metas, jvm_metas = _metas(python), _metas(jvm)
            for b in py_metas:   # the same rows per bucket, so the same sequence numbers
                assert max(f.max_sequence_number for f in jvm_metas[b]) == \
                    max(f.max_sequence_number for f in py_metas[b])
    # a compacted table reads the same (the JVM's files merged by the Python compaction)
    jvm.compact(full=True)
    assert _sorted(jvm.read()) == _expected(first, second)


def _row_group_stats(table: Any) -> dict[int, list[Any]]:
    """Per bucket, each live file's row groups (in sequence order): rows, and per column min, max and nulls."""
    store = table._handle.store
    out: dict[int, list[Any]] = {}
    for e in store.live_entries(store.snapshots.latest()).values():
        meta = pq.ParquetFile(store.data_file_path(e.partition, e.bucket, e.file.file_name)).metadata
        groups = []
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            stats = [rg.column(c).statistics for c in range(rg.num_columns)]
            groups.append((rg.num_rows, [(repr(s.min), repr(s.max), s.null_count) if s is not None and s.has_min_max
                                         else (s.null_count if s is not None else None) for s in stats]))
        out.setdefault(e.bucket, []).append((e.file.min_sequence_number, groups))
    return {b: [g for _, g in sorted(files, key=lambda f: f[0])] for b, files in out.items()}


def test_files_of_several_pages_and_row_groups_are_the_python_writers(spark: Any, tmp_path: Path) -> None:
    """A write of 300k rows into 2 buckets: files of several row groups (65536 rows) and pages (the JVM writer's
    of 20000 rows), with nulls, NaN and -0.0 across page boundaries: the same records, metadata and per row group
    statistics as the Python writer's files."""
    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    opts = {"bucket": "2", "write-buffer-size": "1 gb", "target-file-size": "1 gb", "write-only": "true"}
    jvm = cat.create_table("db.jvm", SCHEMA, primary_key=["id"], options=opts)
    python = cat.create_table("db.py", SCHEMA, primary_key=["id"], options=opts)
    rows = _rows(300_000, 1_000_000, 5)
    df = _frame(spark, rows, tmp_path, "big")
    df.write.format("managed").option("warehouse", str(wh)).mode("append").save("db.jvm")
    df.write.format("managed").option("warehouse", str(wh)).option("jvm-writer", "false").mode("append").save("db.py")
    assert _creators(jvm) == {"parquet-mr"} and _creators(python) == {"parquet-cpp-arrow"}
    assert _metas(jvm) == _metas(python)
    assert _records(jvm) == _records(python)
    groups, py_groups = _row_group_stats(jvm), _row_group_stats(python)
    assert all(len(g) > 1 for files in groups.values() for g in files)   # several row groups per file
    differ = [(b, f, g, SCHEMA.names[c - 2] if c > 1 else c, ours, theirs)
              for b in groups for f, (file, py_file) in enumerate(zip(groups[b], py_groups[b]))
              for g, ((_, cols), (_, py_cols)) in enumerate(zip(file, py_file))
              for c, (ours, theirs) in enumerate(zip(cols, py_cols)) if ours != theirs]
    # the float columns' row group statistics differ, as they did with parquet-mr's own column writers: it keeps
    # NaN as a maximum, Arrow skips NaN (the metadata the file store records agrees: the metas above)
    assert [d for d in differ if d[3] not in ("f32", "f64")] == []
    assert [(ours[2], ours[0]) for *_, ours, theirs in differ] == [(theirs[2], theirs[0]) for *_, _, theirs in differ]


def test_writes_the_jvm_writer_does_not_apply_to_go_through_python(spark: Any, tmp_path: Path) -> None:
    """A changelog (`_row_kind`), a partitioned table, a string primary key, a column type the JVM does not write,
    rows of another type than the table's (Python casts them): the Python writer, as before."""
    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    rows = _rows(500, 200, 3).select(["id", "i32", "s"])

    def schema(id_type: pa.DataType = pa.int64(), i32: pa.Field = pa.field("i32", pa.int32())) -> pa.Schema:
        return pa.schema([pa.field("id", id_type, False), i32, ("s", pa.string())])

    cases: dict[str, tuple[pa.Schema, dict[str, Any], pa.Table]] = {
        "kinds": (schema(), {}, rows.append_column("_row_kind", pa.array(["+I"] * rows.num_rows))),
        "parted": (schema(i32=pa.field("i32", pa.int32(), False)), {"partition_by": ["i32"],
                   "primary_key": ["id", "i32"]}, rows.set_column(1, "i32", pa.array(
                       np.arange(rows.num_rows, dtype=np.int32) % 2))),
        "strkey": (schema(pa.string()), {}, rows.set_column(0, "id", rows.column("id").cast(pa.string()))),
        "ts": (schema(i32=pa.field("i32", pa.timestamp("us"))), {},
               rows.set_column(1, "i32", pa.array(np.arange(rows.num_rows), pa.timestamp("us")))),
        "cast": (schema(i32=pa.field("i32", pa.int64())), {}, rows),
    }
    for name, (table_schema, extra, data) in cases.items():
        key = extra.pop("primary_key", ["id"])
        table = cat.create_table(f"db.{name}", table_schema, primary_key=key, options={"bucket": "2"}, **extra)
        df = _frame(spark, data, tmp_path, name)
        df.write.format("managed").option("warehouse", str(wh)).mode("append").save(f"db.{name}")
        assert _creators(table) == {"parquet-cpp-arrow"}, name
        assert table.read().num_rows == len(set(zip(*(data.column(k).to_pylist() for k in key)))), name


def _failing_write(spark: Any, tmp_path: Path, buckets: int) -> Any:
    """A write whose task of the null key's bucket fails after it flushed runs (a null primary key at the end)."""
    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    table = cat.create_table("db.t", SCHEMA, primary_key=["id"],
                             options={"bucket": str(buckets), "write-buffer-size": "4 kb"})
    rows = _rows(3000, 1000, 4)
    rows = rows.cast(rows.schema.set(0, pa.field("id", pa.int64())))   # a nullable id
    rows = pa.concat_tables([rows, rows.slice(0, 1).set_column(0, "id", pa.array([None], pa.int64()))])
    df = _frame(spark, rows, tmp_path, "bad")
    with pytest.raises(Exception, match="primary-key column 'id' has nulls"):
        df.write.format("managed").option("warehouse", str(wh)).mode("append").save("db.t")
    assert table.latest_snapshot_id() is None
    return table


def test_a_failed_jvm_write_task_deletes_its_files(spark: Any, tmp_path: Path) -> None:
    """The one task of a one-bucket table fails after flushing runs: nothing is committed and the task itself
    deletes every file it wrote."""
    table = _failing_write(spark, tmp_path, buckets=1)
    assert _data_files(table) == []


def test_a_failed_jvm_write_commits_nothing_and_leaves_only_orphans(spark: Any, tmp_path: Path) -> None:
    """Two tasks, one fails: nothing is committed. The job's abort deletes the files of the tasks that finished
    before the failure; a task that finishes after it (Spark does not wait for it) leaves its files unreferenced,
    as the Python writer does: `remove_orphan_files` deletes them, and the table reads empty."""
    table = _failing_write(spark, tmp_path, buckets=2)
    table.remove_orphan_files(older_than=dt.timedelta(0))
    assert _data_files(table) == []
    assert table.read().num_rows == 0
