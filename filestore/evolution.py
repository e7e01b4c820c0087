"""Schema evolution on read: a data file is read under the table's schema, whichever schema it was written under.

A table's schema may gain nullable columns at its end and widen a column's type (`widens`); columns are identified
by name and are never renamed, dropped or reordered (the catalog refuses that: catalog/evolution.py). Every data
file records the id of the schema it was written under (`DataFileMeta.schema_id`, `schema/schema-<id>`), and its
Parquet columns are exactly that schema's. Reading it under schema T (`read_file`):
1. a column of T the file's schema lacks reads as all nulls (of T's type);
2. a column whose type differs is cast: a widening (int8 -> int16 -> int32 -> int64, float32 -> float64,
   decimal(p, s) -> decimal(p', s) with p' > p) never fails; a handle older than the file (T older than the file's
   schema) casts back safely, and a value that does not fit is a SchemaMismatchError asking to reload the table;
3. a filter is handed to the Parquet reader (row groups skipped by their statistics) only when every column it names
   is in the file with T's type; otherwise it is applied after 1 and 2, to the values as T reads them.
Files of T itself, or of a schema with the same columns (an options change also publishes a schema), are read as
they are: the common case costs one comparison per schema id, cached.

Invariants: a schema's columns are a prefix of every later schema's (by name); the types of the bucket key and the
partition columns never change (the bucket hash and the key codec depend on them), so key bytes and buckets of
old files stay valid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from filestore.datafile import read_data_file
from filestore.errors import SchemaMismatchError
from filestore.fileio import FileIO
from filestore.merge import COUNT, KIND, SEQ

_SYSTEM_TYPES = {SEQ: pa.int64(), KIND: pa.int8(), COUNT: pa.int64()}
_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)


def widens(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether a column of type `src` may become `dst` (every value keeps its meaning, the cast never fails):
    a signed integer to a wider one, float32 to float64, decimal(p, s) to decimal(p', s) with p' > p."""
    if pat.is_signed_integer(src) and pat.is_signed_integer(dst):
        return bool(dst.bit_width > src.bit_width)
    if pat.is_float32(src) and pat.is_float64(dst):
        return True
    if pat.is_decimal(src) and pat.is_decimal(dst):
        return bool(dst.scale == src.scale and dst.precision > src.precision)
    return False


@dataclass(frozen=True)
class FileLayout:
    """How a file written under schema `file` reads under schema `target`: the target's columns the file lacks,
    and those whose type differs (target type by name). Empty both: the file reads as it is."""

    file_id: int
    missing: frozenset[str]
    retyped: dict[str, pa.DataType]
    file_types: dict[str, pa.DataType]

    @property
    def plain(self) -> bool:
        return not self.missing and not self.retyped

    @staticmethod
    def of(file_id: int, file: pa.Schema, target: pa.Schema) -> "FileLayout":
        types = {f.name: f.type for f in file}
        missing = frozenset(f.name for f in target if f.name not in types)
        retyped = {f.name: f.type for f in target if f.name in types and not types[f.name].equals(f.type)}
        return FileLayout(file_id, missing, retyped, types)

    def affects(self, names: Sequence[str]) -> bool:
        return any(n in self.missing or n in self.retyped for n in names)

    def pushable(self, filter: pc.Expression) -> bool:
        """Whether `filter` names only columns the file holds with the target's types (see the module, step 3)."""
        unchanged = [pa.field(n, t) for n, t in self.file_types.items() if n not in self.retyped]
        try:
            pa.schema(unchanged).empty_table().filter(filter)
        except (pa.ArrowException, TypeError):
            return False
        return True


def read_file(
    io: FileIO, path: str, file_format: str, layout: FileLayout, target: pa.Schema, names: Sequence[str],
    filter: pc.Expression | None, table_name: str,
) -> pa.Table:
    """Columns `names` (system columns or columns of `target`) of the data file at `path`, read under `target`
    (module docstring); `filter` keeps only matching rows."""
    if layout.plain or (not layout.affects(names) and (filter is None or layout.pushable(filter))):
        return read_data_file(io, path, file_format, names, filter)
    pushed = filter if filter is not None and layout.pushable(filter) else None
    if filter is not None and pushed is None:
        needed = [f.name for f in target if f.name not in layout.missing]  # evaluating it may need any column
        read = list(dict.fromkeys([*names, *needed]))
    else:
        read = list(names)
    table = read_data_file(io, path, file_format, [n for n in read if n not in layout.missing], pushed)
    columns, fields = [], []
    for name in read:
        if name in _SYSTEM_TYPES:
            columns.append(table.column(name))
            fields.append(table.schema.field(name))
            continue
        field = target.field(name)  # the field as files of the target's schema hold it (nullability, comment)
        fields.append(field)
        if name in layout.missing:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, field.type)]))
        elif name in layout.retyped:
            columns.append(_cast(table.column(name), field.type, name, layout, path, table_name))
        else:
            columns.append(table.column(name))
    out = pa.Table.from_arrays(columns, schema=pa.schema(fields))
    if filter is not None and pushed is None:
        out = out.filter(filter)
    return out.select(list(names))


def _cast(column: pa.ChunkedArray, type_: pa.DataType, name: str, layout: FileLayout, path: str,
          table_name: str) -> pa.ChunkedArray:
    try:
        return pc.cast(column, type_, safe=True)
    except _CAST_ERRORS as e:
        raise SchemaMismatchError(
            f"table {table_name!r}: column {name!r} of data file {path} (schema {layout.file_id}) has type "
            f"{layout.file_types[name]}, which this handle reads as {type_}: {e}; the table's schema changed since "
            f"this handle was loaded: load the table again") from None


def project_to(table: pa.Table, schema: pa.Schema, table_name: str) -> pa.Table:
    """Rows read under a newer schema, as a handle of the older `schema` reads them: its columns, cast back safely
    (SchemaMismatchError when a widened value does not fit: the handle must be loaded again)."""
    try:
        return table.select(schema.names).cast(schema, safe=True)
    except _CAST_ERRORS as e:
        raise SchemaMismatchError(
            f"table {table_name!r}: rows written under a newer schema do not fit this handle's columns "
            f"{schema}: {e}; the table's schema changed since this handle was loaded: load the table again") from None
