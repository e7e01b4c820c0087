"""Data files written elsewhere (the JVM twin of the writer in the Spark integration), adopted into the file store:
their metadata is built here, from the file itself, so a manifest holds exactly what it would hold for the same
rows written by `DataFileWriter` (filestore/datafile.py, the reference).

What the file must be (checked): a Parquet data file of the table's format: `_SEQUENCE_NUMBER` int64,
`_VALUE_KIND` int8, then the table's columns in table order with the table's types; sorted by key with unique keys
(the writer's contract, as for every sorted run: not re-checked, the key range is its first and last row). Its
metadata: row count and size from the footer; first and last key from the first and last row group; sequence range
and delete count from the footer statistics (the kinds are read only when a row group may hold a delete); column
statistics as `column_stats` defines them: from the footer where Parquet's order is the key order (strings,
binaries, signed integers, booleans), else computed from the column's values.
"""
from __future__ import annotations

import os
import time
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from filestore.datafile import _stats_from_footer, column_stats
from filestore.errors import CorruptFileError, FileStoreError
from filestore.fileio import FileIO
from filestore.keycodec import KeyCodec
from filestore.merge import KIND, SEQ
from filestore.meta import ColumnStats, DataFileMeta, ValueKind
from filestore.schema import TableSchema


def _footer_ordered(type_: pa.DataType) -> bool:
    """Whether Parquet's min/max statistics of a column of this type are its key order's extremes."""
    return (pa.types.is_string(type_) or pa.types.is_binary(type_) or pa.types.is_boolean(type_)
            or (pa.types.is_integer(type_) and pa.types.is_signed_integer(type_)))


def _footer_range(footer: Any, index: int) -> tuple[Any, Any] | None:
    """Min and max of column `index` over every row group from the statistics, None where one lacks them."""
    lo: Any = None
    hi: Any = None
    for g in range(footer.num_row_groups):
        stats = footer.row_group(g).column(index).statistics
        if stats is None or not stats.has_min_max:
            return None
        lo = stats.min if lo is None else min(lo, stats.min)
        hi = stats.max if hi is None else max(hi, stats.max)
    return (lo, hi) if lo is not None else None


def _check_schema(path: str, found: pa.Schema, schema: TableSchema) -> None:
    expected = [(SEQ, pa.int64()), (KIND, pa.int8())] + [(f.name, f.type) for f in schema.arrow_schema]
    got = [(f.name, f.type) for f in found]
    if got != expected:
        raise FileStoreError(f"data file {path}: columns {got} are not the table's data file columns {expected}")


def adopt_data_file(io: FileIO, path: str, schema: TableSchema, *, level: int = 0) -> DataFileMeta:
    """The metadata of the data file at `path` (a sorted run's file of `schema`'s table, written by another
    writer), as `DataFileWriter` would have recorded it; `level` its level in the LSM tree. Raises FileStoreError
    when the file is not a data file of the table, CorruptFileError when it cannot be read."""
    try:
        with io.arrow_fs().open_input_file(path) as f:
            size = f.size()
            parquet = pq.ParquetFile(f)
            footer = parquet.metadata
            _check_schema(path, parquet.schema_arrow, schema)
            if footer.num_rows == 0:
                raise FileStoreError(f"data file {path} has no rows: a sorted run's file has at least one")
            keys = list(schema.key_columns)
            first = parquet.read_row_group(0, columns=keys, use_threads=False)
            last = parquet.read_row_group(footer.num_row_groups - 1, columns=keys, use_threads=False)
            names = [SEQ, KIND, *schema.arrow_schema.names]
            seq = _footer_range(footer, 0)
            kinds = _footer_range(footer, 1)
            stats: dict[str, ColumnStats] = {}
            read: list[str] = []
            for field in schema.arrow_schema:
                found = _stats_from_footer(footer, field.name, field.type) if _footer_ordered(field.type) else None
                if found is None:
                    read.append(field.name)
                else:
                    stats[field.name] = found
            if seq is None:
                read.append(SEQ)
            if kinds is None or kinds[1] != 0:
                read.append(KIND)
            values = parquet.read(columns=read, use_threads=False) if read else None
    except FileNotFoundError:
        raise FileStoreError(f"data file {path} is missing: the writer that named it did not write it") from None
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(path, str(e)) from e
    assert len(names) == footer.num_columns
    if values is not None:
        own = [name for name in read if name not in (SEQ, KIND)]
        stats.update({s.column: s for s in column_stats(values, own)})
        if SEQ in read:
            mm = pc.min_max(values.column(SEQ))
            seq = (mm["min"].as_py(), mm["max"].as_py())
    deletes = 0
    if values is not None and KIND in read:
        deletes = int(pc.sum(pc.equal(values.column(KIND), pa.scalar(int(ValueKind.DELETE), pa.int8()))).as_py() or 0)
    assert seq is not None
    codec = KeyCodec([schema.arrow_schema.field(k).type for k in keys])
    return DataFileMeta(
        file_name=os.path.basename(path),
        file_size=size,
        row_count=footer.num_rows,
        min_key=codec.encode([first.column(k)[0].as_py() for k in keys]),
        max_key=codec.encode([last.column(k)[-1].as_py() for k in keys]),
        min_sequence_number=int(seq[0]),
        max_sequence_number=int(seq[1]),
        level=level,
        schema_id=schema.id,
        creation_time_ms=int(time.time() * 1000),
        delete_row_count=deletes,
        stats=tuple(stats[f.name] for f in schema.arrow_schema if f.name in stats),
    )
