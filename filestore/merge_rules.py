"""The merge of a primary-key table whose merge engine is not plain deduplication (filestore.merge_engine says what
each engine means): records -> sorted by (key, sequence.field, sequence number) -> one record per key.

Vectorised: one sort of the key and order columns, then per column either a gather at an index per key (last,
first, last non-null, first non-null: found by a running maximum over the keys' positions) or a reduction over
each key's records (sum, count, min, max, bool_and, bool_or: numpy's `reduceat`/`cumsum` for numbers and booleans,
an Arrow hash aggregation over the key's group number for other types). No per-row Python.

The output is a sorted run: one record per key in key order, standing at the key's newest sequence number. A
deduplicate winner keeps its value kind (a non-final merge keeps DELETE winners, a final one drops them); the other
engines' records are ADD (their retractions were applied, or refused at write).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore.keycodec_columns import signed_int_values, stored_as_signed_int
from filestore.merge_engine import MergeEngine
from filestore.merge_keys import COUNT, KIND, SEQ, first_of_each_key
from filestore.meta import ValueKind

_ADD = int(ValueKind.ADD)
_DELETE = int(ValueKind.DELETE)
_HASH = {"sum": "sum", "count": "sum", "max": "max", "min": "min", "bool_and": "all", "bool_or": "any"}


def merge_by_engine(records: pa.Table, key_columns: Sequence[str], engine: MergeEngine, *, final: bool,
                    order: np.ndarray | None = None) -> pa.Table:
    """`records` merged by `engine` (filestore.merge_engine). `order`: indices sorting them by key and arrival when
    the caller knows them (records of runs concatenated oldest first, sorted stably by key: no SEQ needed, and then
    the output has none either; with a `sequence.field`, deduplicate by one integer field only); else found from the
    key, `sequence.field` and SEQ columns. Without KIND every record is an ADD."""
    n = records.num_rows
    if n == 0:
        return records
    records = records.combine_chunks()  # gathers from one chunk per column are many times faster
    given = order is not None
    if order is None:
        order = _order(records, key_columns, engine.sequence_fields)
    starts = _starts(records, key_columns, order)
    ends = np.append(starts[1:], n) - 1
    kinds = np.take(records.column(KIND).to_numpy(), order) if KIND in records.column_names else np.zeros(n, np.int8)
    if engine.name in ("deduplicate", "first-row"):
        chosen = starts if engine.name == "first-row" else ends
        if engine.sequence_fields and given:  # `order` is by key and arrival: the newest by the field wins
            chosen = _newest_by_field(records.column(engine.sequence_fields[0]), order, starts, ends)
        winners = order[chosen]
        if final:
            winners = winners[kinds[chosen] == _ADD]
        return pc.take(records, pa.array(winners), boundscheck=False)  # indices into `records` by construction
    retract = kinds == _DELETE
    out: dict[str, pa.Array | pa.ChunkedArray] = {}
    for name in records.column_names:
        column = records.column(name)
        if name == SEQ:
            out[name] = pa.array(np.maximum.reduceat(column.to_numpy()[order], starts), column.type)
        elif name == KIND:
            out[name] = pa.array(np.full(len(starts), _ADD, dtype=np.int8), column.type)
        elif name in key_columns or name == COUNT:
            out[name] = _gather(column, order[starts], np.zeros(len(starts), dtype=bool))
        elif name in engine.sequence_fields:  # the newest record's: the merged record stands where it stood
            out[name] = _gather(column, order[ends], np.zeros(len(starts), dtype=bool))
        else:
            out[name] = _aggregate(column, engine.function(name), order, starts, ends, retract)
    return pa.table(out, schema=records.schema)


def _newest_by_field(field: pa.ChunkedArray, order: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per key (records `starts[i]..ends[i]` of `order`, by arrival), the position of its record with the highest
    value of the integer `field` (nulls lowest), the latest to arrive among equals: a group maximum, then the last
    record holding it (no sort by the field)."""
    array = field.chunk(0) if field.num_chunks == 1 else field.combine_chunks()
    sizes = np.diff(np.append(starts, len(order)))
    values = np.take(pc.fill_null(array, 0).to_numpy() if array.null_count else array.to_numpy(), order)
    if not array.null_count:
        return _last_valid(values == np.repeat(np.maximum.reduceat(values, starts), sizes), starts, ends)
    valid = np.take(pc.is_valid(array).to_numpy(zero_copy_only=False), order)
    lowest = np.iinfo(values.dtype).min
    filled = np.where(valid, values, lowest)
    any_valid = np.repeat(_last_valid(valid, starts, ends) >= starts, sizes)
    top = np.repeat(np.maximum.reduceat(filled, starts), sizes)
    return _last_valid(np.where(any_valid, valid & (filled == top), True), starts, ends)


def _starts(records: pa.Table, key_columns: Sequence[str], order: np.ndarray) -> np.ndarray:
    """Where each key's records begin in `order`."""
    if len(key_columns) == 1:
        keys = records.column(key_columns[0])
        if not keys.null_count and stored_as_signed_int(keys.type):
            ordered = np.take(signed_int_values(keys.chunk(0)), order)
            return np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    return np.flatnonzero(first_of_each_key(records.select(list(key_columns)).take(pa.array(order)), key_columns))


def _order(records: pa.Table, key_columns: Sequence[str], sequence_fields: Sequence[str]) -> np.ndarray:
    """Indices sorting `records` by key, then `sequence_fields` (nulls first), then sequence number."""
    seq = records.column(SEQ).to_numpy()
    if len(key_columns) == 1 and not sequence_fields:
        keys = records.column(key_columns[0])
        if not keys.null_count and stored_as_signed_int(keys.type):
            return np.lexsort((seq, signed_int_values(keys.combine_chunks())))
    sort_keys = [(k, "ascending", "at_start") for k in [*key_columns, *sequence_fields, SEQ]]
    table = records.select(list(dict.fromkeys([*key_columns, *sequence_fields, SEQ])))
    return pc.sort_indices(table, sort_keys=sort_keys).to_numpy()


def _aggregate(column: pa.ChunkedArray, function: str, order: np.ndarray, starts: np.ndarray, ends: np.ndarray,
               retract: np.ndarray) -> pa.Array | pa.ChunkedArray:
    """One value per key of `column` (records in their original order; `order` sorts them by key and order)."""
    if function == "last_value":  # a retraction as the newest record leaves null
        return _gather(column, order[ends], retract[ends])
    if function == "first_value":
        return _gather(column, order[starts], np.zeros(len(starts), dtype=bool))
    if function in _HASH and (found := _reduce(column, function, order, starts, ends, retract)) is not None:
        return found
    if function in _HASH:
        values = column.take(pa.array(order))
        if retract.any():  # only retracting functions meet retractions (check_retractions): sum, count
            values = pc.if_else(pa.array(retract), pc.negate(values), values)
        group = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.append(starts, len(order))))
        options = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
        grouped = pa.table({"g": group, "v": values}).group_by("g", use_threads=False).aggregate(
            [("v", _HASH[function], options)])
        result = grouped.column(f"v_{_HASH[function]}")
        ids = grouped.column("g").to_numpy()
        if len(ids) > 1 and not bool((ids[1:] > ids[:-1]).all()):
            result = result.take(pa.array(np.argsort(ids)))
        return result.cast(column.type)
    if function not in ("last_non_null_value", "first_non_null_value"):
        raise ValueError(f"unknown aggregate function {function!r}")
    last = function == "last_non_null_value"  # partial-update's rule for each column
    valid = _valid_in_order(column, order)
    if valid is None:
        return _gather(column, order[ends if last else starts], np.zeros(len(starts), dtype=bool))
    positions = np.flatnonzero(valid)  # of the valid records, in key order
    before, upto = _valid_counts(valid, ends)
    absent = upto == before
    if not len(positions):
        return _gather(column, order[starts], absent)
    picked = positions[np.where(absent, 0, upto - 1 if last else np.minimum(before, len(positions) - 1))]
    return _gather(column, order[picked], absent)


def _valid_in_order(column: pa.ChunkedArray | pa.Array, order: np.ndarray) -> np.ndarray | None:
    """Whether each record of `column` is valid (not null), in `order`; None when none is null."""
    if not column.null_count:
        return None
    return np.take(pc.is_valid(column).to_numpy(zero_copy_only=False), order)


def _valid_counts(valid: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per key (its records end at `ends[i]`, the next begin after), how many valid records come before its first
    and up to its last: one running count (cheaper than a segmented reduction over many small keys)."""
    running = np.cumsum(valid, dtype=np.int32 if len(valid) < 2**31 else np.int64)
    upto = running[ends]
    before = np.empty_like(upto)
    before[0] = 0
    before[1:] = upto[:-1]
    return before, upto


def _last_valid(valid: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per key (records `starts[i]..ends[i]`), the position of its last valid record; below `starts[i]` when it has
    none. One running maximum (a sequential pass: several times faster than `reduceat` over many small keys)."""
    positions: np.ndarray = np.arange(len(valid), dtype=np.int32 if len(valid) < 2**31 else np.int64)  # narrow
    np.multiply(positions, valid, out=positions)  # an invalid record's position becomes 0, then -1: below any start
    np.subtract(positions, ~valid, out=positions)
    np.maximum.accumulate(positions, out=positions)
    return positions[ends]


def _reduce(column: pa.ChunkedArray, function: str, order: np.ndarray, starts: np.ndarray, ends: np.ndarray,
            retract: np.ndarray) -> pa.Array | None:
    """`_aggregate`'s hash aggregations by numpy over the keys' runs of records (a running sum, `reduceat`), for
    integer, floating point and boolean columns (several times faster than Arrow's group-by); None for other
    types. A null is no input; a key with none has a null result."""
    t = column.type
    if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)) or pa.types.is_float16(t):
        return None
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    valid = _valid_in_order(array, order)
    absent = None
    if valid is not None:
        before, upto = _valid_counts(valid, ends)
        absent = upto == before
    if pa.types.is_boolean(t):
        values = np.take(pc.fill_null(array, function == "bool_and").to_numpy(zero_copy_only=False), order)
        logical = np.logical_and if function == "bool_and" else np.logical_or
        return pa.array(logical.reduceat(values, starts), t, mask=absent)
    floating = pa.types.is_floating(t)
    if function in ("sum", "count"):
        fill: float | int = 0
    elif floating:  # a null never wins: it reads as the type's least (max) or greatest (min) value
        fill = -np.inf if function == "max" else np.inf
    else:
        bounds = np.iinfo(t.to_pandas_dtype())
        fill = int(bounds.min if function == "max" else bounds.max)
    numbers = np.take(_values(array), order)  # a null's slot holds anything: overwritten with `fill`
    if valid is not None:  # a scatter to the nulls' positions: a masked copy branches on every record
        numbers[np.flatnonzero(~valid)] = fill
    if function in ("sum", "count"):
        if retract.any():
            np.negative(numbers, out=numbers, where=retract)
        if floating:  # summed per key: a difference of running sums would lose a small key's digits to the total
            return pa.array(np.add.reduceat(numbers, starts), t, mask=absent)
        # a key's sum: the running sum at its end less the one at the key before (exact for integers, wrapping as
        # a per-key sum would)
        return pa.array(np.diff(np.cumsum(numbers)[ends], prepend=0), t, mask=absent)
    pick = (np.fmax if floating else np.maximum) if function == "max" else (np.fmin if floating else np.minimum)
    return pa.array(pick.reduceat(numbers, starts), t, mask=absent)


def _values(array: pa.Array) -> np.ndarray:
    """The value buffer of a fixed-width numeric `array` as numpy, nulls' slots included (no copy)."""
    dtype = np.dtype(array.type.to_pandas_dtype())
    return np.frombuffer(array.buffers()[1], dtype=dtype)[array.offset: array.offset + len(array)]


def _gather(column: pa.ChunkedArray, rows: np.ndarray, null: np.ndarray) -> pa.Array | pa.ChunkedArray:
    """`column` at `rows`, null where `null`."""
    indices = pa.array(rows, mask=null) if null.any() else pa.array(rows)
    array = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()  # a chunked take is far slower
    return pc.take(array, indices, boundscheck=False)  # `rows` are positions in `column` by construction
