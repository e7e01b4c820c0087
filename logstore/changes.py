"""The change kinds on the wire: the one owner of +I / -U / +U / -D, which are additions and which retractions,
the default kind of a batch without a `_row_kind` column, and the validation of that column.

Invariant (on the wire, never rename): the enum values are the short strings Flink prints and the
`_row_kind` column of every Arrow batch the log store reads or writes holds exactly these strings.
The file store has its own value kinds; the translation happens in `tablestore/` only. Every other package
imports these names from the `logstore` package root.
"""
from __future__ import annotations

import enum
from typing import Final, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logstore.errors import InvalidRowKindError

__all__ = [
    "ADDITIONS", "ADDITION_VALUES", "IS_ADDITION", "RETRACTIONS", "RETRACTION_VALUES", "ROW_KIND_COLUMN",
    "ROW_KIND_VALUES", "RowKind", "addition_mask", "check_row_kinds", "insert_kinds", "row_kinds_of",
]

ROW_KIND_COLUMN = "_row_kind"  # on-disk / on-wire column name


class RowKind(str, enum.Enum):
    """One change of a changelog, as Flink's RowKind (short-string form)."""

    INSERT = "+I"
    UPDATE_BEFORE = "-U"
    UPDATE_AFTER = "+U"
    DELETE = "-D"

    @property
    def is_addition(self) -> bool:
        """True for +I and +U (the row is in the table after the change)."""
        return self in ADDITIONS

    def __str__(self) -> str:
        return self.value


ADDITIONS = frozenset({RowKind.INSERT, RowKind.UPDATE_AFTER})
RETRACTIONS = frozenset({RowKind.UPDATE_BEFORE, RowKind.DELETE})
ROW_KIND_VALUES: Final = tuple(k.value for k in RowKind)  # ("+I", "-U", "+U", "-D")
ADDITION_VALUES: Final = (RowKind.INSERT.value, RowKind.UPDATE_AFTER.value)
RETRACTION_VALUES: Final = (RowKind.UPDATE_BEFORE.value, RowKind.DELETE.value)
IS_ADDITION: Final[Mapping[str, bool]] = {k.value: k in ADDITIONS for k in RowKind}
"""For each kind string: True for an addition (+I, +U), False for a retraction (-U, -D)."""

_VALUE_SET = pa.array(ROW_KIND_VALUES, pa.string())
_ADDITION_SET = pa.array(ADDITION_VALUES, pa.string())


def insert_kinds(n: int) -> pa.Array:
    """A `_row_kind` column of `n` rows, all +I: the kind of every row of a batch without that column."""
    return pa.repeat(pa.scalar(RowKind.INSERT.value, pa.string()), n)  # one vectorised fill, no Python strings


def check_row_kinds(kinds: pa.Array | pa.ChunkedArray, *, table: str | None = None) -> None:
    """Raise InvalidRowKindError unless every value is one of +I, -U, +U, -D (no nulls); names the column type, or
    the distinct bad values and how many rows hold them. Vectorised; an empty column is valid."""
    type_ = kinds.type
    if not (pa.types.is_string(type_) or pa.types.is_large_string(type_) or pa.types.is_null(type_)
            or pa.types.is_dictionary(type_) and pa.types.is_string(type_.value_type)):
        raise InvalidRowKindError(
            f"{ROW_KIND_COLUMN!r} must be a string column of {', '.join(ROW_KIND_VALUES)}, not {type_}",
            table=table)
    if len(kinds) == 0:
        return
    if pa.types.is_null(type_):
        raise InvalidRowKindError(f"{ROW_KIND_COLUMN!r} is null in all {len(kinds)} rows", table=table,
                                  kinds=[None], count=len(kinds))
    valid = pc.fill_null(pc.is_in(kinds, value_set=_VALUE_SET), False)
    if pc.all(valid, min_count=0).as_py():
        return
    bad = pc.filter(kinds, pc.invert(valid))
    distinct = pc.unique(bad).to_pylist()
    shown = sorted(distinct, key=lambda v: (v is None, str(v)))[:5]
    more = f" and {len(distinct) - 5} more" if len(distinct) > 5 else ""
    raise InvalidRowKindError(
        f"{len(bad)} of {len(kinds)} rows have an invalid {ROW_KIND_COLUMN} {shown!r}{more}: "
        f"expected one of {', '.join(ROW_KIND_VALUES)}",
        table=table, kinds=shown, count=len(bad))


def addition_mask(kinds: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """True where the (checked) kind is an addition (+I, +U), False where it is a retraction (-U, -D)."""
    return np.asarray(pc.is_in(kinds, value_set=_ADDITION_SET).to_numpy(zero_copy_only=False), dtype=bool)


def row_kinds_of(batch: pa.Table | pa.RecordBatch, *, table: str | None = None) -> pa.Array | pa.ChunkedArray:
    """The checked `_row_kind` column of `batch`, or all +I when it has none."""
    if ROW_KIND_COLUMN not in batch.schema.names:
        return insert_kinds(batch.num_rows)
    kinds = batch.column(ROW_KIND_COLUMN)
    check_row_kinds(kinds, table=table)
    return kinds
