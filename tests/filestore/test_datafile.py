"""Data files: the statistics of a file (min/max in key order) and Parquet row-group skipping.

`column_stats` finds the extremes natively and encodes only them; it must equal encoding every value
(`column_stats_encoding_all`), NaN, -0.0, nulls and nanoseconds included. A filtered read skips row groups by their
statistics and must return exactly the rows, in the same order, that filtering the whole file returns.
"""
from __future__ import annotations

import datetime as dt
import decimal
import os
from pathlib import Path

import fsspec
import pytest
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filestore.datafile import (
    DataFileWriter,
    column_stats,
    column_stats_encoding_all,
    merge_column_stats,
    read_data_file,
)
from filestore.fileio import FileIO
from filestore.keycodec import KeyCodec
from filestore.merge import KIND, SEQ
from filestore.meta import ValueKind
from filestore.paths import TablePaths

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, float("nan")])
COLUMNS: dict[str, tuple[pa.DataType, st.SearchStrategy[object]]] = {
    "i8": (pa.int8(), st.integers(-128, 127)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "u32": (pa.uint32(), st.integers(0, 2**32 - 1)),
    "f64": (pa.float64(), floats),
    "f32": (pa.float32(), st.floats(width=32, allow_nan=True) | st.sampled_from([0.0, -0.0])),
    "s": (pa.string(), st.text(max_size=4)),
    "b": (pa.binary(), st.binary(max_size=4)),
    "fb": (pa.binary(2), st.binary(min_size=2, max_size=2)),
    "bool": (pa.bool_(), st.booleans()),
    "ts_ns": (pa.timestamp("ns"), st.integers(-(2**62), 2**62)),
    "date": (pa.date32(), st.dates(min_value=dt.date(1, 1, 1))),
    "dec": (pa.decimal128(10, 2), st.decimals(min_value=-10**7, max_value=10**7, places=2, allow_nan=False)),
    "list": (pa.list_(pa.int64()), st.lists(st.integers(0, 3), max_size=2)),  # no order: no statistics
}


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    n = draw(st.integers(0, 30))
    arrays = {}
    for name, (type_, values) in COLUMNS.items():
        arrays[name] = pa.array(draw(st.lists(values | st.none(), min_size=n, max_size=n)), type_)
    return pa.table(arrays)


@SETTINGS
@given(tables())
def test_stats_from_native_extremes_equal_stats_of_every_encoded_value(table: pa.Table) -> None:
    chunked = pa.concat_tables([table.slice(0, table.num_rows // 2), table.slice(table.num_rows // 2)])
    assert column_stats(chunked, table.column_names) == column_stats_encoding_all(table, table.column_names)


def test_stats_order_nan_last_and_negative_zero_first() -> None:
    table = pa.table({"x": pa.array([0.0, float("nan"), -0.0, None], pa.float64())})
    (stats,) = column_stats(table, ["x"])
    (reference,) = column_stats_encoding_all(table, ["x"])
    assert stats == reference
    assert stats.null_count == 1
    assert stats.min is not None and stats.max == b"\x01" + b"\xff" * 8  # NaN is the largest float
    zero = column_stats(pa.table({"x": [0.0]}), ["x"])[0].min
    assert zero is not None and stats.min < zero  # -0.0 sorts before 0.0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 3000), st.integers(-10, 3010), st.integers(0, 500), st.sampled_from([1, 7, 256]))
def test_row_group_skipping_returns_the_rows_of_a_full_filter(n: int, lo: int, width: int, group: int) -> None:
    import pyarrow.parquet as pq

    fs = fsspec.filesystem("memory")
    io = FileIO(fs)
    keys = pa.array(range(0, 2 * n, 2), pa.int64())
    table = pa.table({"k": keys, "v": pc.multiply(keys, 3)})
    with fs.open("/f.parquet", "wb") as f:
        pq.write_table(table, f, row_group_size=group)
    expr = (pc.field("k") >= lo) & (pc.field("k") < lo + width)
    skipped = read_data_file(io, "/f.parquet", "parquet", ["k", "v"], expr)
    assert skipped.equals(table.filter(expr))


def test_decimal_stats() -> None:
    table = pa.table({"d": pa.array([decimal.Decimal("1.50"), decimal.Decimal("-2.25")], pa.decimal128(10, 2))})
    assert column_stats(table, ["d"]) == column_stats_encoding_all(table, ["d"])


@SETTINGS
@given(tables(), st.integers(0, 30))
def test_stats_of_two_parts_merged_equal_the_stats_of_the_whole(table: pa.Table, cut: int) -> None:
    cut = min(cut, table.num_rows)
    names = table.column_names
    parts = column_stats(table.slice(0, cut), names), column_stats(table.slice(cut), names)
    assert merge_column_stats(*parts) == column_stats_encoding_all(table, names)


def _records(n: int, seed: int) -> pa.Table:
    """A sorted run of `n` records: unique sorted keys, sequence numbers in any order, some deletes, nulls."""
    import numpy as np

    rng = np.random.default_rng(seed)
    keys = np.sort(rng.choice(10 * n + 1, n, replace=False)).astype(np.int64)
    return pa.table({
        SEQ: pa.array(rng.permutation(n).astype(np.int64) + 5),
        KIND: pa.array(np.where(rng.random(n) < 0.2, int(ValueKind.DELETE), int(ValueKind.ADD)).astype(np.int8)),
        "k": pa.array(keys),
        "f": pa.array(rng.normal(size=n), mask=rng.random(n) < 0.1),
        "s": pa.array([f"s{v}" for v in rng.integers(0, 50, n)]),
    })


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 200), st.integers(0, 2**32), st.sampled_from([1, 3, 64]), st.sampled_from([1, 40, 10**6]),
       st.sampled_from(["parquet", "orc"]))
def test_a_run_written_a_row_group_at_a_time_is_the_run(n: int, seed: int, group: int, file_rows: int,
                                                         file_format: str) -> None:
    """`write_rows` asks for a run's rows one row group at a time (a flush's run is never materialised whole); the
    files hold exactly the run, in order, rolling at target-file-size, and their metadata (key range, sequence
    range, deletes, column statistics) equals what the whole of each file's rows gives."""
    import pyarrow.parquet as pq

    from filestore import datafile

    run = _records(n, seed)
    io = FileIO(fsspec.filesystem("memory"))
    paths = TablePaths(f"/t{seed}-{n}-{group}-{file_rows}", file_format)
    writer = DataFileWriter(io, paths, partition_keys=[], key_columns=["k"], stats_columns=run.column_names[2:],
                            schema_id=0, file_format=file_format, compression="snappy",
                            target_file_size=file_rows * max(1, run.nbytes // n))
    asked: list[int] = []

    def rows(start: int, length: int) -> pa.Table:
        asked.append(length)
        return run.slice(start, length)

    original = datafile.ROW_GROUP_ROWS
    try:
        datafile.ROW_GROUP_ROWS = group
        metas = writer.write_rows(run.schema, n, run.nbytes, rows, (), 0, level=0)
    finally:
        datafile.ROW_GROUP_ROWS = original
    if file_format == "parquet":
        assert max(asked) <= group
    codec = KeyCodec([pa.int64()])
    start = 0
    for meta in metas:
        path = paths.data_file([], (), 0, meta.file_name)
        back = read_data_file(io, path, file_format)
        whole = run.slice(start, meta.row_count)
        start += meta.row_count
        assert back.equals(whole)
        if file_format == "parquet":
            footer = pq.ParquetFile(pa.BufferReader(io.read_bytes(path))).metadata
            assert footer.num_row_groups == -(-meta.row_count // group)
            # page indexes: a filtered read (Spark's Parquet reader, the JVM's raw and merged splits) skips pages
            chunks = [footer.row_group(g).column(c) for g in range(footer.num_row_groups)
                      for c in range(footer.num_columns)]
            assert all(c.has_column_index and c.has_offset_index for c in chunks)
        assert (meta.min_key, meta.max_key) == (codec.encode([whole["k"][0].as_py()]),
                                                codec.encode([whole["k"][-1].as_py()]))
        assert (meta.min_sequence_number, meta.max_sequence_number) == (pc.min(whole[SEQ]).as_py(),
                                                                      pc.max(whole[SEQ]).as_py())
        assert meta.delete_row_count == pc.sum(pc.equal(whole[KIND], int(ValueKind.DELETE))).as_py()
        assert meta.stats == column_stats_encoding_all(whole, run.column_names[2:])
    assert start == n


@pytest.mark.parametrize("long_at", [None, 0, 2])
def test_string_stats_come_from_the_parquet_footer_or_from_the_file(long_at: int | None) -> None:
    """A Parquet file's string and binary statistics are the writer's own row-group min/max; a row group whose
    values exceed the writer's statistics limit has none, and the column is read back from the file instead."""
    from filestore import datafile

    values: list[str | None] = ["m", None, "b", "zz", "", "c"]
    if long_at is not None:
        values[long_at] = "\U0001f600" * 3000  # 12,000 bytes: more than Parquet keeps in statistics
    run = pa.table({SEQ: pa.array(range(6), pa.int64()), KIND: pa.array([0] * 6, pa.int8()),
                    "k": pa.array(range(6), pa.int64()), "s": pa.array(values, pa.string()),
                    "b": pa.array([v.encode() if v is not None else None for v in values], pa.binary())})
    io = FileIO(fsspec.filesystem("memory"))
    paths = TablePaths(f"/long-{long_at}")
    writer = DataFileWriter(io, paths, partition_keys=[], key_columns=["k"], stats_columns=["k", "s", "b"],
                            schema_id=0, file_format="parquet", compression="snappy", target_file_size=1 << 30)
    original = datafile.ROW_GROUP_ROWS
    try:
        datafile.ROW_GROUP_ROWS = 2
        (meta,) = writer.write_run(run, (), 0, level=0)
    finally:
        datafile.ROW_GROUP_ROWS = original
    assert meta.stats == column_stats_encoding_all(run, ["k", "s", "b"])


def test_a_data_file_stream_that_fails_leaves_no_partial_file(tmp_path: Path) -> None:
    io = FileIO(fsspec.filesystem("file"))
    path = str(tmp_path / "b-0" / "data.parquet")
    with pytest.raises(RuntimeError, match="encoding failed"):
        with io.open_output(path) as out:
            out.write(b"PAR1 half a file")
            raise RuntimeError("encoding failed")
    assert not os.path.exists(path)
    with io.open_output(path) as out:
        out.write(b"whole")
    assert Path(path).read_bytes() == b"whole"
