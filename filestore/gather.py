"""Taking rows of a write's input by row number, as the flush does (filestore.write): the rows of a bucket in key
order are scattered over the whole input, so every value taken is a cache miss.

Arrow's `take` of a string or binary column copies each value with its own `memcpy` after looking up its offsets,
two dependent misses and a call per value (about 50 ns a value from a 5M-row input, ten times the in-order cost).
A large input's string and binary columns are therefore cast once to their view type (Arrow's string_view: 16 bytes
a value, a value of up to 12 bytes held inline, a longer one as a prefix and a reference into the column's own
data), and a take is a numpy take of those 16-byte views (one miss per value, no call), then a cast back to the
column's type, from memory that is now in order. The result is the same as Arrow's `take` (a test compares them).

The combined columns and the views (as large as the input) come from the system allocator: Arrow's default pool
hands a fresh process memory whose first touch zeroes 2 MB huge pages, several times the kernel time of 4 KB pages
for the same bytes on the machines measured (docs/design.md, "Performance of the file store").
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore.parallel import pool

_COMBINE_MIN_ROWS = 1 << 16
_POOL = pa.system_memory_pool()


def _view_type(type_: pa.DataType) -> pa.DataType | None:
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return pa.string_view()
    if pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        return pa.binary_view()
    return None


@dataclass(frozen=True)
class _Views:
    """A string or binary column cast to its view type: `views` its 16-byte views as pairs of uint64."""

    type: pa.DataType
    array: pa.Array
    views: np.ndarray


def _views_of(column: pa.Array, view_type: pa.DataType) -> _Views:
    array = pc.cast(column, view_type, memory_pool=_POOL)
    views = np.frombuffer(array.buffers()[1], dtype=np.uint64).reshape(-1, 2)[array.offset : array.offset + len(array)]
    return _Views(column.type, array, views)


def _take_views(column: _Views, idx: np.ndarray) -> pa.Array:
    views = np.take(column.views, idx, axis=0)
    validity = None
    if column.array.null_count:
        validity = pc.take(pc.is_valid(column.array), pa.array(idx), boundscheck=False).buffers()[1]
    taken = pa.Array.from_buffers(column.array.type, len(idx), [validity, pa.py_buffer(views),
                                                                *column.array.buffers()[2:]])
    return taken.cast(column.type)


class GatherSource:
    """An input table prepared for many `take`s by row number. A large input's columns are combined into one chunk
    each (Arrow's `take` on a column of several chunks concatenates them first, at every call) and its string and
    binary columns cast to views (see the module's docstring), each column on the worker pool."""

    def __init__(self, table: pa.Table, *, min_rows: int = _COMBINE_MIN_ROWS) -> None:
        """`min_rows`: a smaller table is taken from as it is (Arrow's take is as fast for it)."""
        self.table = table
        self._views: dict[int, _Views] = {}
        if table.num_rows < min_rows:
            return
        work = [i for i, column in enumerate(table.columns) if column.num_chunks > 1 or _view_type(column.type)]

        def prepare(i: int) -> tuple[pa.ChunkedArray, _Views | None]:
            column = table.column(i)
            array = column.chunk(0) if column.num_chunks == 1 else pa.concat_arrays(column.chunks, memory_pool=_POOL)
            view_type = _view_type(array.type)
            if array.nbytes >= 1 << 31:  # a view addresses its value by a 32-bit offset into one data buffer
                view_type = None
            return pa.chunked_array([array]), None if view_type is None else _views_of(array, view_type)

        for i, (column, views) in zip(work, pool().map(prepare, work)):
            self.table = self.table.set_column(i, table.schema.field(i), column)
            if views is not None:
                self._views[i] = views

    def take(self, idx: np.ndarray) -> pa.Table:
        """Rows `idx` of the table (each below its length: no bounds check), in that order."""
        indices = pa.array(idx)
        if not self._views:
            return pc.take(self.table, indices, boundscheck=False)
        others = [i for i in range(self.table.num_columns) if i not in self._views]
        rest = pc.take(self.table.select(others), indices, boundscheck=False)
        columns: list[pa.Array | pa.ChunkedArray] = []
        for i in range(self.table.num_columns):
            if i in self._views:
                columns.append(_take_views(self._views[i], idx))
            else:
                columns.append(rest.column(others.index(i)))
        return pa.Table.from_arrays(columns, schema=self.table.schema)
