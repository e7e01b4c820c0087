"""Adopting a data file written elsewhere (filestore.adopt_data_file, used for the JVM writer's files): the metadata
built from the file must be exactly what DataFileWriter (the reference) recorded for the same file: key range,
sequence range, deletes, row count, size and column statistics (NaN, -0.0, nulls, all-null columns, strings, several
row groups). A file that is not a data file of the table is refused with a typed error naming it."""
from __future__ import annotations

import dataclasses

import fsspec
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filestore import FileStoreError, TableSchema, adopt_data_file
from filestore.datafile import DataFileWriter
from filestore.fileio import FileIO
from filestore.merge import KIND, SEQ
from filestore.paths import TablePaths

floats = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, float("nan")])
COLUMNS: dict[str, tuple[pa.DataType, st.SearchStrategy[object]]] = {
    "i8": (pa.int8(), st.integers(-128, 127)),
    "i16": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "i32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "i64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "f64": (pa.float64(), floats),
    "f32": (pa.float32(), st.floats(width=32, allow_nan=True) | st.sampled_from([0.0, -0.0])),
    "s": (pa.string(), st.text(max_size=4)),
    "b": (pa.binary(), st.binary(max_size=4)),
    "bool": (pa.bool_(), st.booleans()),
    "date": (pa.date32(), st.dates()),
}


@st.composite
def runs(draw: st.DrawFn) -> pa.Table:
    """A sorted run: unique increasing keys, any sequence numbers, some deletes, random column values."""
    keys = sorted(draw(st.sets(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=40)))
    n = len(keys)
    arrays: dict[str, pa.Array] = {
        SEQ: pa.array(draw(st.lists(st.integers(0, 2**40), min_size=n, max_size=n)), pa.int64()),
        KIND: pa.array(draw(st.lists(st.sampled_from([0, 0, 0, 1]), min_size=n, max_size=n)), pa.int8()),
        "k": pa.array(keys, pa.int64()),
    }
    for name, (type_, values) in COLUMNS.items():
        arrays[name] = pa.array(draw(st.lists(values | st.none(), min_size=n, max_size=n)), type_)
    return pa.table(arrays)


def _schema(run: pa.Table) -> TableSchema:
    return TableSchema(id=3, arrow_schema=pa.schema([f for f in run.schema if f.name not in (SEQ, KIND)]),
                       primary_keys=("k",))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=runs(), group=st.sampled_from([3, 7, 65_536]))
def test_adopted_metadata_is_what_the_writer_recorded(run: pa.Table, group: int) -> None:
    from filestore import datafile

    io = FileIO(fsspec.filesystem("memory"))
    paths = TablePaths(f"/adopt-{id(run)}-{group}")
    schema = _schema(run)
    writer = DataFileWriter(io, paths, partition_keys=[], key_columns=["k"], stats_columns=schema.arrow_schema.names,
                            schema_id=schema.id, file_format="parquet", compression="lz4", target_file_size=1 << 30)
    original = datafile.ROW_GROUP_ROWS
    try:
        datafile.ROW_GROUP_ROWS = group
        (meta,) = writer.write_run(run, (), 0, level=0)
    finally:
        datafile.ROW_GROUP_ROWS = original
    adopted = adopt_data_file(io, paths.data_file([], (), 0, meta.file_name), schema, level=0)
    assert adopted == dataclasses.replace(meta, creation_time_ms=adopted.creation_time_ms)


def test_a_file_of_other_columns_is_refused(tmp_path: pytest.TempPathFactory) -> None:
    io = FileIO(fsspec.filesystem("file"))
    run = pa.table({SEQ: pa.array([1], pa.int64()), KIND: pa.array([0], pa.int8()), "k": pa.array([1], pa.int32())})
    path = f"{tmp_path}/data-x-0.parquet"
    pq.write_table(run, path)
    schema = TableSchema(id=0, arrow_schema=pa.schema([("k", pa.int64())]), primary_keys=("k",))
    with pytest.raises(FileStoreError, match="data-x-0.parquet"):
        adopt_data_file(io, path, schema)
    with pytest.raises(FileStoreError, match="missing"):
        adopt_data_file(io, f"{tmp_path}/data-absent.parquet", schema)
