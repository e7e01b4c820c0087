"""What a write may cast, and the normal form of key values: the one rule `FileStoreWrite.conform` applies.

A column is cast to the table's type only when no value changes meaning:
1. the same type, or a source of Arrow's null type (an all-null column), always fits;
2. within one family a cast is made *safely* and checked value by value: integers, floats and decimals are one
   numeric family (int64 -> int32, float64 -> float32, 2.0 -> 2 are fine when every value survives the round trip;
   300 -> int8, 0.1 -> float32, 1.5 -> int64, 2**53 + 1 -> float64 are refused); strings of any offset width;
   binaries (and fixed-size binaries of the right width); dates; times; durations; timestamps of any unit when no
   sub-unit digit is lost and both sides have a time zone or neither has (a naive time is not an instant);
   lists, maps and structs (same field names) whose children fit by these rules; a dictionary by its values;
3. everything else is a SchemaMismatchError naming the table, the column and both types: no number becomes a
   string (12345 -> '12345'), no string a number ('6' -> 6), no boolean or timestamp a string.
Floats compare by value with NaN equal to NaN in the round-trip check.

Key normal form (FLIP-188 keys must be equal to themselves): in the merge key columns (the primary key, or every
column of a table without one) a float -0.0 becomes 0.0 and every NaN the one canonical NaN, so that equal keys have
equal bytes for the bucket hash, the key codec and the merge (which treats NaN as equal to NaN), as Spark
normalizes floating-point grouping keys. A user writing -0.0 into a key column reads 0.0 back.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pat

from filestore.errors import SchemaMismatchError

_CAST_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError)
_Check = Callable[[pa.DataType], bool]
_FAMILIES: tuple[tuple[str, _Check], ...] = (
    ("numeric", lambda t: pat.is_integer(t) or pat.is_floating(t) or pat.is_decimal(t)),
    ("string", lambda t: pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t)),
    ("binary", lambda t: pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t)
     or pat.is_fixed_size_binary(t)),
    ("boolean", pat.is_boolean),
    ("date", pat.is_date),
    ("time", pat.is_time),
    ("duration", pat.is_duration),
    ("timestamp", pat.is_timestamp),
    ("list", lambda t: pat.is_list(t) or pat.is_large_list(t) or pat.is_fixed_size_list(t)
     or pat.is_list_view(t) or pat.is_large_list_view(t)),
    ("map", pat.is_map),
    ("struct", pat.is_struct),
)


def _family(t: pa.DataType) -> str | None:
    return next((name for name, check in _FAMILIES if check(t)), None)


def incompatibility(src: pa.DataType, dst: pa.DataType) -> str | None:
    """Why `src` may not be cast to `dst` by the rules above (before looking at values), or None when it may."""
    if src.equals(dst) or pat.is_null(src):
        return None
    if pat.is_dictionary(src):
        return incompatibility(src.value_type, dst)
    family = _family(src)
    if family is None or family != _family(dst):
        return "a cast between these types would change what the values mean"
    if family == "timestamp" and (src.tz is None) != (dst.tz is None):
        return "a timestamp without a time zone is not an instant: give both a time zone or neither"
    if family == "list":
        return incompatibility(src.value_type, dst.value_type)
    if family == "map":
        return incompatibility(src.key_type, dst.key_type) or incompatibility(src.item_type, dst.item_type)
    if family == "struct":
        src_names = [src.field(i).name for i in range(src.num_fields)]
        dst_names = [dst.field(i).name for i in range(dst.num_fields)]
        if sorted(src_names) != sorted(dst_names):
            return f"the struct fields {src_names} are not the table's {dst_names}"
        for i in range(dst.num_fields):
            why = incompatibility(src.field(dst.field(i).name).type, dst.field(i).type)
            if why:
                return f"field {dst.field(i).name!r}: {why}"
    return None


def _round_trip_loss(original: pa.ChunkedArray, cast: pa.ChunkedArray) -> object | None:
    """A value of a numeric cast that did not survive going back to its own type, or None."""
    back = pc.cast(cast, original.type, safe=False)
    same = pc.fill_null(pc.equal(back, original), True)
    if pat.is_floating(original.type):
        same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(back), pc.is_nan(original)), False))
    if pc.all(same, min_count=0).as_py():
        return None
    return original.filter(pc.invert(same))[0].as_py()


def conform_column(table_name: str, name: str, column: pa.ChunkedArray, dst: pa.DataType) -> pa.ChunkedArray:
    """`column` as type `dst`, or SchemaMismatchError naming the column and both types."""
    src = column.type
    if src.equals(dst):
        return column
    prefix = f"table {table_name!r}: column {name!r} has type {src}, the table's type is {dst}"
    why = incompatibility(src, dst)
    if why:
        raise SchemaMismatchError(f"{prefix}: {why}")
    try:
        cast = pc.cast(column, dst, safe=True)
    except _CAST_ERRORS as e:
        raise SchemaMismatchError(f"{prefix}: {e}") from None
    if _family(src) == "numeric":
        lost = _round_trip_loss(column, cast)
        if lost is not None:
            raise SchemaMismatchError(f"{prefix}: the value {lost!r} does not fit exactly")
    return cast


def conform_table(table_name: str, data: pa.Table, target: pa.Schema) -> pa.Table:
    """The columns of `target`, in its order, each cast by `conform_column` (the caller checked the names)."""
    columns = [conform_column(table_name, f.name, data.column(f.name), f.type) for f in target]
    return pa.Table.from_arrays(columns, schema=target)


def normalize_keys(data: pa.Table, key_columns: Sequence[str]) -> pa.Table:
    """Float key columns in normal form: -0.0 as 0.0, every NaN as the canonical NaN (see the module docstring)."""
    for name in key_columns:
        column = data.column(name)
        if not pat.is_floating(column.type) or len(column) == 0:
            continue
        work = pc.cast(column, pa.float32()) if pat.is_float16(column.type) else column  # no float16 kernels
        normal = pc.if_else(pc.is_nan(work), pa.scalar(np.nan, work.type), pc.add(work, pa.scalar(0, work.type)))
        normal = pc.cast(normal, column.type) if pat.is_float16(column.type) else normal
        data = data.set_column(data.schema.get_field_index(name), data.schema.field(name), normal)
    return data
