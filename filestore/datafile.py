"""Data files: a sorted run written as one or more files of the table's format, with their metadata.

A data file holds `_SEQUENCE_NUMBER`, `_VALUE_KIND` (and `_VALUE_COUNT` without a primary key) followed by the
row columns, sorted by key. Files of one run have disjoint key ranges; a run rolls to a new file at
`target-file-size` (estimated from the in-memory size).
"""
from __future__ import annotations

import threading
import time
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.orc as orc
import pyarrow.parquet as pq

from filestore.errors import CorruptFileError, FileStoreError
from filestore.fileio import FileIO
from filestore.keycodec import KeyCodec, KeyCodecError
from filestore.merge import KIND, SEQ
from filestore.meta import ColumnStats, DataFileMeta, Partition, ValueKind
from filestore.paths import TablePaths

FORMATS = ("parquet", "orc")
# Parquet row groups of this many rows, each with min/max statistics: files are sorted by key, so a key-range read
# skips every row group outside the range (see filestore.read). No dictionary encoding: with row groups this size a
# dictionary rebuilt per group costs more write time than it saves (the codec compresses repeated values anyway).
ROW_GROUP_ROWS = 65_536


# Room for a Parquet file's bytes beyond the table's in-memory size (headers, statistics, footer).
SERIALIZE_MARGIN = 1 << 20


def _write_parquet(table: pa.Table, sink: pa.NativeFile, compression: str) -> None:
    pq.write_table(table, sink, compression=compression, row_group_size=ROW_GROUP_ROWS, write_statistics=True,
                   use_dictionary=False)


def _serialize(table: pa.Table, file_format: str, compression: str) -> memoryview:
    """The file's bytes, in an Arrow buffer viewed without a copy. Parquet is written into a buffer of the table's
    in-memory size plus a margin, allocated once (only the pages written are touched): a stream that grows doubles
    and copies its buffer, touching about twice the file's size of fresh memory, which costs a bulk write more
    kernel time (page faults) than the encoding's own. A file larger than that buffer is written again into a
    growing stream."""
    if file_format == "parquet":
        buffer = pa.allocate_buffer(table.nbytes + SERIALIZE_MARGIN, resizable=True)
        fixed = pa.FixedSizeBufferWriter(buffer)
        try:
            _write_parquet(table, fixed, compression)
        except OSError:  # "write out of bounds": more bytes than the buffer holds
            pass
        else:
            return memoryview(buffer)[: fixed.tell()]
    sink = pa.BufferOutputStream()
    if file_format == "parquet":
        _write_parquet(table, sink, compression)
    elif file_format == "orc":
        orc.write_table(table, sink, compression=compression)
    else:
        raise FileStoreError(f"unknown file format {file_format!r}; valid: {', '.join(FORMATS)}")
    return memoryview(sink.getvalue())


def read_data_file(
    io: FileIO, path: str, file_format: str, columns: Sequence[str] | None = None,
    filter: pc.Expression | None = None,
) -> pa.Table:
    """The rows of one data file, in file order. `filter` keeps only matching rows; for Parquet it is handed to the
    reader, which skips the row groups whose statistics contradict it."""
    names = list(columns) if columns is not None else None
    try:
        if file_format == "parquet":
            # a native Arrow file, not a Python file object: Arrow's reader may drop its last reference to the file
            # on one of its own threads after the read returned, and releasing a Python object there needs the GIL,
            # which aborts the process if the interpreter is exiting ("terminate called without an active
            # exception"). Arrow's threads only from the main thread: the file store's pool workers use the cores.
            main = threading.current_thread() is threading.main_thread()
            with io.arrow_fs().open_input_file(path) as f:
                return pq.read_table(f, columns=names, filters=filter, use_threads=main)
        with io.open_input(path) as f:
            table = orc.read_table(f, columns=names)
            return table if filter is None else table.filter(filter)
    except FileNotFoundError:
        raise FileStoreError(
            f"data file {path} is missing: was it removed by hand or by a bad orphan cleanup?"
        ) from None
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(path, str(e)) from e


def column_stats(table: pa.Table, columns: Sequence[str]) -> tuple[ColumnStats, ...]:
    """Min/max per column in key order, as encoded key bytes: NaN is the largest float, -0.0 < 0.0, and no precision
    is lost. Arrow's `min_max` finds the extremes (it ignores NaN and ties -0.0 with 0.0); only the values equal to
    them (and NaNs) are encoded, and the min/max of those encodings is the answer, the same as encoding every value
    (`column_stats_encoding_all`, the reference the tests compare against)."""
    out = []
    for name in columns:
        col = table.column(name)
        try:
            codec = KeyCodec([col.type])
        except KeyCodecError:
            continue  # no order on this type: the column is never used to skip files
        try:
            candidates = _extreme_candidates(col)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError, pa.ArrowInvalid):  # no native min_max: encode all
            candidates = col.drop_null()
        out.append(_stats_of(name, codec.encode_columns([candidates]), col.null_count))
    return tuple(out)


def column_stats_encoding_all(table: pa.Table, columns: Sequence[str]) -> tuple[ColumnStats, ...]:
    """The definition of `column_stats`: min/max over the key encoding of every value (slow; tests use it)."""
    out = []
    for name in columns:
        col = table.column(name)
        try:
            encoded = KeyCodec([col.type]).encode_columns([col.drop_null()])
        except KeyCodecError:
            continue
        out.append(_stats_of(name, encoded, col.null_count))
    return tuple(out)


def _stats_of(name: str, encoded: pa.Array, null_count: int) -> ColumnStats:
    if len(encoded) == 0:
        return ColumnStats(name, None, None, null_count)
    mm = pc.min_max(encoded)
    return ColumnStats(name, mm["min"].as_py(), mm["max"].as_py(), null_count)


def _extreme_candidates(col: pa.ChunkedArray) -> pa.Array:
    """The non-null values among which the key-order min and max are: the native extremes, plus for floats every
    zero when an extreme is zero (-0.0 == 0.0 natively but they encode differently) and one NaN, if any."""
    values = col.drop_null() if col.null_count else col
    if len(values) == 0:
        return pa.array([], col.type)
    mm = pc.min_max(values)
    lo, hi = mm["min"], mm["max"]
    extremes = pa.array([lo, hi], values.type)  # equal values encode equally, but for the cases below
    if not pa.types.is_floating(values.type):
        return extremes
    parts = [extremes.filter(pc.invert(pc.is_nan(extremes)))]
    if lo.as_py() == 0 or hi.as_py() == 0:
        parts.append(values.filter(pc.equal(values, 0)).combine_chunks())
    if pc.any(pc.is_nan(values)).as_py():
        parts.append(pa.array([float("nan")], values.type))
    return pa.concat_arrays(parts)


class DataFileWriter:
    """Writes sorted runs of one table."""

    def __init__(
        self,
        io: FileIO,
        paths: TablePaths,
        *,
        partition_keys: Sequence[str],
        key_columns: Sequence[str],
        stats_columns: Sequence[str],
        schema_id: int,
        file_format: str,
        compression: str,
        target_file_size: int,
    ) -> None:
        self.io = io
        self.paths = paths
        self.partition_keys = tuple(partition_keys)
        self.key_columns = tuple(key_columns)
        self.stats_columns = tuple(stats_columns)
        self.schema_id = schema_id
        self.file_format = file_format
        self.compression = compression
        self.target_file_size = target_file_size
        self._key_codec: KeyCodec | None = None

    def _codec(self, run: pa.Table) -> KeyCodec:
        if self._key_codec is None:
            self._key_codec = KeyCodec([run.schema.field(k).type for k in self.key_columns])
        return self._key_codec

    def write_run(self, run: pa.Table, partition: Partition, bucket: int, level: int) -> list[DataFileMeta]:
        """Write one sorted run (already merged and sorted by key) as files rolling at target-file-size."""
        if run.num_rows == 0:
            return []
        bytes_per_row = max(1, run.nbytes // run.num_rows)
        rows_per_file = max(1, self.target_file_size // bytes_per_row)
        metas = []
        for start in range(0, run.num_rows, rows_per_file):
            metas.append(self._write_file(run.slice(start, rows_per_file), partition, bucket, level))
        return metas

    def _write_file(self, chunk: pa.Table, partition: Partition, bucket: int, level: int) -> DataFileMeta:
        name = self.paths.new_data_file_name()
        path = self.paths.data_file(self.partition_keys, partition, bucket, name)
        data = _serialize(chunk, self.file_format, self.compression)
        self.io.write_bytes(path, data)
        codec = self._codec(chunk)
        keys = chunk.select(list(self.key_columns))
        seq = pc.min_max(chunk.column(SEQ))
        deletes = pc.sum(pc.equal(chunk.column(KIND), pa.scalar(int(ValueKind.DELETE), pa.int8()))).as_py() or 0
        return DataFileMeta(
            file_name=name,
            file_size=len(data),
            row_count=chunk.num_rows,
            min_key=codec.encode([c[0].as_py() for c in keys.columns]),
            max_key=codec.encode([c[-1].as_py() for c in keys.columns]),
            min_sequence_number=seq["min"].as_py(),
            max_sequence_number=seq["max"].as_py(),
            level=level,
            schema_id=self.schema_id,
            creation_time_ms=int(time.time() * 1000),
            delete_row_count=int(deletes),
            stats=column_stats(chunk, self.stats_columns),
        )
