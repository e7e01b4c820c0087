"""Data files: a sorted run written as one or more files of the table's format, with their metadata.

A data file holds `_SEQUENCE_NUMBER`, `_VALUE_KIND` (and `_VALUE_COUNT` without a primary key) followed by the
row columns, sorted by key. Files of one run have disjoint key ranges; a run rolls to a new file at
`target-file-size` (estimated from the in-memory size).
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Any, Callable, Iterable, Iterator, Sequence

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
# The serialize buffer holds this many times the rows' in-memory size (plus the margin): only the pages written are
# touched, so the slack costs address space, not memory, and a file of incompressible values larger than its rows
# in memory (plain-encoded Parquet is a little larger than Arrow) still fits: it is not encoded twice.
SERIALIZE_SLACK = 2

# Rows [start, start + length) of a sorted run, in run order, as records (see filestore.merge).
RowsOf = Callable[[int, int], pa.Table]


def _parquet_writer(schema: pa.Schema, sink: pa.NativeFile, compression: str) -> pq.ParquetWriter:
    return pq.ParquetWriter(sink, schema, compression=compression, write_statistics=True, use_dictionary=False)


def _write_parquet(pieces: Iterable[pa.Table], schema: pa.Schema, sink: pa.NativeFile, compression: str) -> Any:
    """One Parquet file of `pieces`, each at most ROW_GROUP_ROWS rows and all but the last exactly that many: the
    file's row groups are the pieces (the same groups `pq.write_table(..., row_group_size=ROW_GROUP_ROWS)` makes).
    Returns the file's footer (`pq.FileMetaData`)."""
    with _parquet_writer(schema, sink, compression) as writer:
        for piece in pieces:
            writer.write_table(piece, row_group_size=ROW_GROUP_ROWS)
    return writer.writer.metadata


def _pieces(rows: RowsOf, start: int, length: int) -> Iterator[pa.Table]:
    for at in range(start, start + length, ROW_GROUP_ROWS):
        yield rows(at, min(ROW_GROUP_ROWS, start + length - at))


def _serialize(table: pa.Table, file_format: str, compression: str) -> memoryview:
    """The bytes of one data file of `table` (see `_serialize_rows`)."""
    return _serialize_rows(None, table.schema, table.slice, 0, table.num_rows, table.nbytes, file_format,
                           compression)


def _serialize_rows(
    facts: "_FileFacts | None", schema: pa.Schema, rows: RowsOf, start: int, length: int, nbytes: int,
    file_format: str, compression: str, buffer: pa.Buffer | None = None,
) -> memoryview:
    """The file's bytes, in an Arrow buffer viewed without a copy. The rows are made and encoded one row group at a
    time (`facts` sees each piece as it passes, then the footer, for the file's metadata), so a run taken from a
    memtable is
    never materialised whole: its pieces reuse the same few megabytes. Parquet is written into a buffer of
    SERIALIZE_SLACK x the rows' in-memory size `nbytes` plus a margin, allocated once (only the pages written are
    touched): a stream that grows doubles and copies its buffer, touching about twice the file's size of fresh
    memory, which costs a bulk write more kernel time (page faults) than the encoding's own. A file larger than
    that buffer is written again into a growing stream (its statistics are observed again, to the same values).
    `buffer`: one to reuse (a file writer's, already touched), if at least that large."""
    def observe(pieces: Iterator[pa.Table]) -> Iterator[pa.Table]:
        return pieces if facts is None else facts.observe(pieces)

    if file_format == "parquet":
        if buffer is None or buffer.size < SERIALIZE_SLACK * nbytes + SERIALIZE_MARGIN:
            buffer = pa.allocate_buffer(SERIALIZE_SLACK * nbytes + SERIALIZE_MARGIN, resizable=True)
        fixed = pa.FixedSizeBufferWriter(buffer)
        try:
            footer = _write_parquet(observe(_pieces(rows, start, length)), schema, fixed, compression)
        except OSError:  # "write out of bounds": more bytes than the buffer holds
            pass
        else:
            if facts is not None:
                facts.footer = footer
            return memoryview(buffer)[: fixed.tell()]
    sink = pa.BufferOutputStream()
    if file_format == "parquet":
        footer = _write_parquet(observe(_pieces(rows, start, length)), schema, sink, compression)
        if facts is not None:
            facts.footer = footer
    elif file_format == "orc":
        whole = list(observe(iter([rows(start, length)])))
        orc.write_table(pa.concat_tables(whole) if len(whole) != 1 else whole[0], sink, compression=compression)
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


def merge_column_stats(a: Sequence[ColumnStats], b: Sequence[ColumnStats]) -> tuple[ColumnStats, ...]:
    """The `column_stats` of two tables' rows together, from the stats of each (same columns, same order)."""
    def pick(x: bytes | None, y: bytes | None, best: Callable[[bytes, bytes], bytes]) -> bytes | None:
        return y if x is None else x if y is None else best(x, y)

    return tuple(
        ColumnStats(p.column, pick(p.min, q.min, min), pick(p.max, q.max, max), p.null_count + q.null_count)
        for p, q in zip(a, b, strict=True)
    )


def _stats_from_footer(footer: Any, name: str, type_: pa.DataType) -> ColumnStats | None:
    """A string or binary column's `column_stats` from the min/max the Parquet writer computed for every row group
    (byte order, which is the key order of these types), or None where a row group has values but no min/max
    (the writer omits them for values longer than its statistics limit)."""
    codec = KeyCodec([type_])
    lo: Any = None
    hi: Any = None
    nulls = 0
    for g in range(footer.num_row_groups):
        group = footer.row_group(g)
        column = next((group.column(i) for i in range(group.num_columns) if group.column(i).path_in_schema == name),
                      None)
        stats = None if column is None else column.statistics
        if stats is None or stats.null_count is None:
            return None
        nulls += stats.null_count
        if not stats.has_min_max:
            if stats.null_count < group.num_rows:
                return None
            continue
        lo = stats.min if lo is None else min(lo, stats.min)
        hi = stats.max if hi is None else max(hi, stats.max)
    if lo is None:
        return ColumnStats(name, None, None, nulls)
    return ColumnStats(name, codec.encode([lo]), codec.encode([hi]), nulls)


def _byte_ordered(type_: pa.DataType) -> bool:
    return (pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_binary(type_)
            or pa.types.is_large_binary(type_))


class _FileFacts:
    """What a data file's metadata says about its rows, gathered from its pieces as they are encoded (each piece
    is read while it is still in the CPU's cache): first and last key, sequence range, deletes, column stats.
    In a Parquet file the statistics of string and binary columns are taken from the footer: the writer computes
    the min/max of every row group anyway, in byte order, which is their key order (a scan of every value less)."""

    def __init__(self, schema: pa.Schema, key_columns: Sequence[str], stats_columns: Sequence[str],
                 file_format: str) -> None:
        self.key_columns, self.stats_columns = list(key_columns), list(stats_columns)
        self.types = {name: schema.field(name).type for name in stats_columns}
        self.from_footer = {name for name in stats_columns if file_format == "parquet" and "." not in name
                            and _byte_ordered(self.types[name])}
        self.own_columns = [name for name in stats_columns if name not in self.from_footer]
        self.footer: Any = None
        self._reset()

    def _reset(self) -> None:
        self.first_key: list[object] = []
        self.last_key: list[object] = []
        self.min_seq: int | None = None
        self.max_seq: int | None = None
        self.deletes = 0
        self.stats: tuple[ColumnStats, ...] | None = None

    def observe(self, pieces: Iterator[pa.Table]) -> Iterator[pa.Table]:
        self._reset()  # a second pass (the file written again into a growing stream) starts over
        for piece in pieces:
            if piece.num_rows:
                self._add(piece)
            yield piece

    def _add(self, piece: pa.Table) -> None:
        keys = piece.select(self.key_columns)
        if not self.first_key:
            self.first_key = [c[0].as_py() for c in keys.columns]
        self.last_key = [c[-1].as_py() for c in keys.columns]
        seq = pc.min_max(piece.column(SEQ))
        lo, hi = seq["min"].as_py(), seq["max"].as_py()
        self.min_seq = lo if self.min_seq is None else min(self.min_seq, lo)
        self.max_seq = hi if self.max_seq is None else max(self.max_seq, hi)
        kinds = piece.column(KIND)
        self.deletes += int(pc.sum(pc.equal(kinds, pa.scalar(int(ValueKind.DELETE), pa.int8()))).as_py() or 0)
        stats = column_stats(piece, self.own_columns)
        self.stats = stats if self.stats is None else merge_column_stats(self.stats, stats)

    def column_stats(self, data: memoryview) -> tuple[ColumnStats, ...]:
        """Every stats column's statistics, in order; a column the footer lacks is read back from `data`."""
        found = {s.column: s for s in self.stats or ()}
        for name in self.from_footer:
            stats = _stats_from_footer(self.footer, name, self.types[name])
            if stats is None:
                (stats,) = column_stats(pq.read_table(pa.BufferReader(data), columns=[name]), [name])
            found[name] = stats
        return tuple(found[name] for name in self.stats_columns if name in found)


class DataFileWriter:
    """Writes sorted runs of one table. Safe to use from several threads (the flushes of one write run on the
    worker pool). Each thread's serialize buffer is kept for its next file until `release_buffers`: the pages of
    a fresh buffer cost kernel time (page faults) on first touch, about as much as the file's encoding."""

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
        self._buffers: queue.SimpleQueue[pa.Buffer] = queue.SimpleQueue()

    def release_buffers(self) -> None:
        """Drop the serialize buffers kept for reuse (a write does at the end of its prepare-commit)."""
        while not self._buffers.empty():
            self._buffers.get_nowait()

    def _codec(self, schema: pa.Schema) -> KeyCodec:
        if self._key_codec is None:
            self._key_codec = KeyCodec([schema.field(k).type for k in self.key_columns])
        return self._key_codec

    def write_run(self, run: pa.Table, partition: Partition, bucket: int, level: int) -> list[DataFileMeta]:
        """Write one sorted run (already merged and sorted by key) as files rolling at target-file-size."""
        return self.write_rows(run.schema, run.num_rows, run.nbytes, run.slice, partition, bucket, level)

    def write_rows(
        self, schema: pa.Schema, num_rows: int, nbytes: int, rows: RowsOf, partition: Partition, bucket: int,
        level: int,
    ) -> list[DataFileMeta]:
        """Write a sorted run given as `rows(start, length)` (records of `schema` in run order; `nbytes` its
        in-memory size, an estimate will do) as files rolling at target-file-size. The rows are asked for one row
        group at a time, so a run a flush takes from its memtable is never materialised whole."""
        if num_rows == 0:
            return []
        bytes_per_row = max(1, nbytes // num_rows)
        rows_per_file = max(1, self.target_file_size // bytes_per_row)
        return [
            self._write_file(schema, rows, start, min(rows_per_file, num_rows - start), bytes_per_row, partition,
                             bucket, level)
            for start in range(0, num_rows, rows_per_file)
        ]

    def _write_file(
        self, schema: pa.Schema, rows: RowsOf, start: int, length: int, bytes_per_row: int, partition: Partition,
        bucket: int, level: int,
    ) -> DataFileMeta:
        name = self.paths.new_data_file_name()
        path = self.paths.data_file(self.partition_keys, partition, bucket, name)
        facts = _FileFacts(schema, self.key_columns, self.stats_columns, self.file_format)
        try:
            buffer = self._buffers.get_nowait()
        except queue.Empty:
            buffer = None
        data = _serialize_rows(facts, schema, rows, start, length, bytes_per_row * length, self.file_format,
                               self.compression, buffer)
        self.io.write_bytes(path, data)  # keeps no reference to `data` (FileIO's contract): its buffer is reused
        size, stats = len(data), facts.column_stats(data)
        if isinstance(data.obj, pa.ResizableBuffer):  # the buffer `_serialize_rows` allocated or was given
            self._buffers.put(data.obj)
        codec = self._codec(schema)
        assert facts.min_seq is not None and facts.max_seq is not None  # length > 0
        return DataFileMeta(
            file_name=name,
            file_size=size,
            row_count=length,
            min_key=codec.encode(facts.first_key),
            max_key=codec.encode(facts.last_key),
            min_sequence_number=facts.min_seq,
            max_sequence_number=facts.max_seq,
            level=level,
            schema_id=self.schema_id,
            creation_time_ms=int(time.time() * 1000),
            delete_row_count=facts.deletes,
            stats=stats,
        )
