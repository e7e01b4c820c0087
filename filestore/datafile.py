"""Data files: a sorted run written as one or more files of the table's format, with their metadata.

A data file holds `_SEQUENCE_NUMBER`, `_VALUE_KIND` (and `_VALUE_COUNT` without a primary key) followed by the
row columns, sorted by key. Files of one run have disjoint key ranges; a run rolls to a new file at
`target-file-size` (estimated from the in-memory size).
"""
from __future__ import annotations

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
# Page indexes (column and offset indexes) are written too: Spark's Parquet reader (the Spark jar's raw and merged
# splits) then skips the pages of a row group outside a key range (about 20k rows each, Arrow's default).
ROW_GROUP_ROWS = 65_536


# Rows [start, start + length) of a sorted run, in run order, as records (see filestore.merge).
RowsOf = Callable[[int, int], pa.Table]


def _parquet_writer(schema: pa.Schema, sink: pa.NativeFile, compression: str) -> pq.ParquetWriter:
    return pq.ParquetWriter(sink, schema, compression=compression, write_statistics=True, use_dictionary=False,
                            write_page_index=True)


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


def _write_rows(
    io: FileIO, path: str, facts: "_FileFacts", schema: pa.Schema, rows: RowsOf, start: int, length: int,
    file_format: str, compression: str,
) -> int:
    """Write rows [start, start + length) of `rows` as the data file at `path`; returns its size. The rows are made
    and encoded one row group at a time (`facts` sees each piece as it passes, then the footer, for the file's
    metadata), so a run taken from a memtable is never materialised whole. Parquet is streamed to the file as it
    is encoded (FileIO.open_output): no buffer of the whole file, whose fresh pages cost a bulk write as much
    kernel time (page faults, then a copy of cold memory into the page cache) as the encoding itself."""
    if file_format == "parquet":
        with io.open_output(path) as sink:
            facts.footer = _write_parquet(facts.observe(_pieces(rows, start, length)), schema, sink, compression)
            size: int = sink.tell()
        return size
    if file_format != "orc":
        raise FileStoreError(f"unknown file format {file_format!r}; valid: {', '.join(FORMATS)}")
    sink = pa.BufferOutputStream()
    whole = list(facts.observe(iter([rows(start, length)])))
    orc.write_table(pa.concat_tables(whole) if len(whole) != 1 else whole[0], sink, compression=compression)
    data = sink.getvalue()
    io.write_bytes(path, data)
    return data.size


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
    if _has_nan(values):
        parts.append(pa.array([float("nan")], values.type))
    return pa.concat_arrays(parts)


def _has_nan(values: pa.ChunkedArray | pa.Array) -> bool:
    """Whether a float column holds a NaN. Its sum is NaN then (a pass with no array allocated); a NaN sum without
    a NaN value (+inf and -inf both present) is told apart by the exact test."""
    total = pc.sum(values).as_py()
    if total is None or total == total:
        return False
    return bool(pc.any(pc.is_nan(values)).as_py())


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
        self._reset()
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

    def column_stats(self, read_column: Callable[[str], pa.Table]) -> tuple[ColumnStats, ...]:
        """Every stats column's statistics, in order; a column the footer lacks is read back from the file."""
        found = {s.column: s for s in self.stats or ()}
        for name in self.from_footer:
            stats = _stats_from_footer(self.footer, name, self.types[name])
            if stats is None:
                (stats,) = column_stats(read_column(name), [name])
            found[name] = stats
        return tuple(found[name] for name in self.stats_columns if name in found)


class DataFileWriter:
    """Writes sorted runs of one table. Safe to use from several threads (the flushes of one write run on the
    worker pool)."""

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
            self._write_file(schema, rows, start, min(rows_per_file, num_rows - start), partition, bucket, level)
            for start in range(0, num_rows, rows_per_file)
        ]

    def _write_file(
        self, schema: pa.Schema, rows: RowsOf, start: int, length: int, partition: Partition, bucket: int,
        level: int,
    ) -> DataFileMeta:
        name = self.paths.new_data_file_name()
        path = self.paths.data_file(self.partition_keys, partition, bucket, name)
        facts = _FileFacts(schema, self.key_columns, self.stats_columns, self.file_format)
        size = _write_rows(self.io, path, facts, schema, rows, start, length, self.file_format, self.compression)
        stats = facts.column_stats(lambda column: read_data_file(self.io, path, self.file_format, [column]))
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
