"""What the two keyed operators share: row kinds, the clock, and the Arrow batch adapter.

A change is ``(kind, row)`` with ``kind`` one of ``"+I"``, ``"-U"``, ``"+U"``, ``"-D"`` and ``row`` a tuple.
An Arrow batch of changes is a table with a string column ``_row_kind`` plus the row columns; the row tuple is
the non-``_row_kind`` columns in schema order. Output batches have the input's schema (same column order,
same types).

Clock: ``now_ms`` passed to ``process`` is the current time in ms and the write time of what the event stores;
``None`` means "no newer time": the latest time seen so far (0 before any) is used. Times are not required to
increase, but expiry is only correct when they do.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa

import logstore
from logstore import IS_ADDITION, ROW_KIND_COLUMN, ROW_KIND_VALUES, RowKind
from tablestore.materializer.errors import InvalidRowKindError, RowShapeError
from tablestore.materializer.rows import RowCodec

# the change kinds on the wire are owned by logstore.changes; the hot path compares plain strings
INSERT: Final = RowKind.INSERT.value
UPDATE_BEFORE: Final = RowKind.UPDATE_BEFORE.value
UPDATE_AFTER: Final = RowKind.UPDATE_AFTER.value
DELETE: Final = RowKind.DELETE.value
ROW_KINDS: Final = ROW_KIND_VALUES

# True: an ADD (+I, +U); False: a RETRACT (-U, -D) -- logstore's table, under the materializer's short name
IS_ADD: Final = IS_ADDITION

Row = tuple[Any, ...]
Change = tuple[str, Row]


class KeyedChangeProcessor(ABC):
    """A keyed operator that turns one input change into zero or more output changes."""

    def __init__(self, row_types: Sequence[pa.DataType] | None) -> None:
        self._rows = RowCodec(row_types)
        self._clock = 0

    def _tick(self, now_ms: int | None) -> int:
        if now_ms is None:
            return self._clock
        self._clock = now_ms
        return now_ms

    @abstractmethod
    def process(self, kind: str, row: Sequence[Any], now_ms: int | None = None) -> list[Change]:
        """Process one change; returns the changes emitted, in order."""

    def process_batch(self, table: pa.Table, *, now_ms: int | None = None) -> pa.Table:
        """Process every change of ``table`` in order (``now_ms`` applies to the whole batch); returns the
        emitted changes as a table of the same schema. Equivalent to calling :meth:`process` row by row."""
        kinds, rows, row_fields = batch_changes(table)
        if self._rows.types is None:
            self._rows.set_types([f.type for f in row_fields])
        out: list[Change] = []
        extend, process = out.extend, self.process
        for kind, row in zip(kinds, rows):
            extend(process(kind, row, now_ms))
        return changes_table(out, table.schema)


def batch_changes(table: pa.Table) -> tuple[list[str], list[Row], list[pa.Field]]:
    """Split a batch into its row kinds, its row tuples and the row columns' fields."""
    names = table.schema.names
    if names.count(ROW_KIND_COLUMN) != 1:
        raise RowShapeError(tuple(names), f"a batch of changes needs exactly one {ROW_KIND_COLUMN!r} column")
    kind_col = table.column(ROW_KIND_COLUMN)
    kind_type = kind_col.type
    if not (pa.types.is_string(kind_type) or pa.types.is_large_string(kind_type) or pa.types.is_null(kind_type)):
        raise RowShapeError(tuple(names), f"{ROW_KIND_COLUMN!r} must be a string column, not {kind_col.type}")
    try:
        logstore.check_row_kinds(kind_col)
    except logstore.InvalidRowKindError as e:
        raise InvalidRowKindError.of(e) from None
    kinds = kind_col.to_pylist()
    fields = [f for f in table.schema if f.name != ROW_KIND_COLUMN]
    columns = [table.column(i).to_pylist() for i, n in enumerate(names) if n != ROW_KIND_COLUMN]
    rows = list(zip(*columns)) if columns else [()] * table.num_rows
    return kinds, rows, fields


def changes_table(changes: list[Change], schema: pa.Schema) -> pa.Table:
    """Emitted changes as a table of ``schema`` (which has the ``_row_kind`` column somewhere)."""
    arrays: list[pa.Array] = []
    col = 0
    for field in schema:
        if field.name == ROW_KIND_COLUMN:
            arrays.append(pa.array([k for k, _ in changes], type=field.type))
        else:
            i = col
            arrays.append(pa.array([r[i] for _, r in changes], type=field.type))
            col += 1
    return pa.Table.from_arrays(arrays, schema=schema)
