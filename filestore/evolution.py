"""Schema evolution on read: a data file is read under the table's schema, whichever schema it was written under.

A table's schema may gain nullable columns at its end, widen a column's type (`widens`), rename a column and drop
one (catalog/evolution.py has the rules). Columns are identified by their ids (`TableSchema.field_ids`): a renamed
column keeps its id, a column added under a dropped column's name gets a new one. Every data file records the id
of the schema it was written under (`DataFileMeta.schema_id`, `schema/schema-<id>`), and its Parquet columns are
exactly that schema's, under that schema's names. Reading it under schema T (`read_file`), column by column of T:
1. a column whose id the file's schema lacks reads as all nulls (of T's type): added since, or added under the name
   of a dropped column (whose data never comes back);
2. a column the file's schema has under another name is read under that name and renamed;
3. a column whose type differs is cast: a widening (int8 -> int16 -> int32 -> int64, float32 -> float64,
   decimal(p, s) -> decimal(p', s) with p' > p) never fails; a handle older than the file (T older than the file's
   schema) casts back safely, and a value that does not fit is a SchemaMismatchError asking to reload the table;
4. a column of the file whose id T lacks (dropped since) is not read;
5. a filter is handed to the Parquet reader (row groups skipped by their statistics) only when every column it names
   is in the file with T's id, name and type; otherwise it is applied after 1 to 3, to the values as T reads them.
Files of T itself, or of a schema with the same columns (an options change also publishes a schema), are read as
they are: the common case costs one comparison per schema id, cached.

Invariants: a column's id is never given to another column; the bucket key, primary-key and partition columns are
never renamed, dropped or retyped (the bucket hash, the key codec and the paths depend on them), so key bytes,
buckets and partitions of old files stay valid.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from filestore.datafile import read_data_file
from filestore.errors import SchemaMismatchError
from filestore.fileio import FileIO
from filestore.merge import COUNT, KIND, SEQ
from filestore.schema import TableSchema

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
    """How a file written under schema `file` reads under schema `target`, by column id (module docstring): the
    target's columns the file lacks, those it holds under another name (target name -> file name) and those whose
    type differs (target name -> target type). `file_types`: the file's type of each target column it holds (by
    target name); `target_names`: file column name -> target name, for the file's columns the target holds."""

    file_id: int
    missing: frozenset[str]
    retyped: dict[str, pa.DataType]
    file_types: dict[str, pa.DataType]
    renamed: dict[str, str] = field(default_factory=dict)
    target_names: dict[str, str] = field(default_factory=dict)

    @property
    def plain(self) -> bool:
        return not self.missing and not self.retyped and not self.renamed

    @staticmethod
    def of(file_id: int, file: pa.Schema, target: pa.Schema, file_ids: Sequence[int] | None = None,
           target_ids: Sequence[int] | None = None) -> "FileLayout":
        """`file_ids`, `target_ids`: the columns' ids (TableSchema.field_ids); None: their positions."""
        by_id = {i: f for i, f in zip(range(len(file)) if file_ids is None else file_ids, file)}
        ids = range(len(target)) if target_ids is None else target_ids
        missing, retyped, renamed, types, names = set(), {}, {}, {}, {}
        for i, f in zip(ids, target):
            old = by_id.get(i)
            if old is None:
                missing.add(f.name)
                continue
            types[f.name], names[old.name] = old.type, f.name
            if old.name != f.name:
                renamed[f.name] = old.name
            if not old.type.equals(f.type):
                retyped[f.name] = f.type
        return FileLayout(file_id, frozenset(missing), retyped, types, renamed, names)

    def affects(self, names: Sequence[str]) -> bool:
        return any(n in self.missing or n in self.retyped or n in self.renamed for n in names)

    def pushable(self, filter: pc.Expression) -> bool:
        """Whether `filter` names only columns the file holds with the target's ids, names and types (see the
        module, step 5)."""
        same = [pa.field(n, t) for n, t in self.file_types.items() if n not in self.retyped and n not in self.renamed]
        return _binds(filter, pa.schema(same))

    def file_name(self, name: str) -> str:
        """The name the file holds target column (or system column) `name` under."""
        return self.renamed.get(name, name)


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
    table = read_data_file(io, path, file_format, [layout.file_name(n) for n in read if n not in layout.missing],
                           pushed)
    columns, fields = [], []
    for name in read:
        if name in _SYSTEM_TYPES:
            columns.append(table.column(name))
            fields.append(table.schema.field(name))
            continue
        field_ = target.field(name)  # the field as files of the target's schema hold it (nullability, comment)
        fields.append(field_)
        if name in layout.missing:
            columns.append(pa.chunked_array([pa.nulls(table.num_rows, field_.type)]))
        elif name in layout.retyped:
            columns.append(_cast(table.column(layout.file_name(name)), field_.type, name, layout, path, table_name))
        else:
            columns.append(table.column(layout.file_name(name)))
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


def newer_names(older: TableSchema, newer: TableSchema, columns: Sequence[str], filter: pc.Expression | None,
                table_name: str) -> list[str]:
    """The names a newer schema gives `columns` of an older one (by id), for a handle of `older` reading files
    of `newer` (then `project_to`). SchemaMismatchError when one of them was dropped since, or `filter` names a
    column renamed or dropped since: the handle must be loaded again."""
    by_id = newer.names_by_id
    renamed = {n: by_id.get(i) for n, i in zip(older.arrow_schema.names, older.field_ids) if by_id.get(i) != n}
    gone = [c for c in columns if c in renamed and renamed[c] is None]
    if gone or (filter is not None and renamed and not _binds(filter, pa.schema(
            [f for f in older.arrow_schema if f.name not in renamed]))):
        changed = gone or sorted(renamed)
        raise SchemaMismatchError(
            f"table {table_name!r}: columns {changed} were renamed or dropped since this handle was loaded (schema "
            f"{older.id}, files of schema {newer.id}): load the table again")
    return [renamed.get(c) or c for c in columns]


def _binds(filter: pc.Expression, schema: pa.Schema) -> bool:
    try:
        schema.empty_table().filter(filter)
    except (pa.ArrowException, TypeError):
        return False
    return True


def project_to(table: pa.Table, schema: pa.Schema, table_name: str) -> pa.Table:
    """Rows read under a newer schema (their columns in the order of `schema`'s, named as `newer_names` gives),
    as a handle of the older `schema` reads them: its columns, cast back safely (SchemaMismatchError when a widened
    value does not fit: the handle must be loaded again)."""
    try:
        return table.select(range(len(schema))).rename_columns(schema.names).cast(schema, safe=True)
    except _CAST_ERRORS as e:
        raise SchemaMismatchError(
            f"table {table_name!r}: rows written under a newer schema do not fit this handle's columns "
            f"{schema}: {e}; the table's schema changed since this handle was loaded: load the table again") from None
