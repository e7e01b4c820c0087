"""The one merge function of the file store: flush, compaction and read all call `merge`.

Inputs are Arrow tables of records: the row columns plus `_SEQUENCE_NUMBER` (int64), `_VALUE_KIND` (int8,
filestore.meta.ValueKind) and, for tables without a primary key, `_VALUE_COUNT` (int64).

Rules:
- Primary-key table: per key the record with the highest sequence number wins; a winning DELETE removes the key.
  Sequence numbers are unique per bucket, so the winner is unique. A table with another merge engine (or a
  `sequence.field`) merges by filestore.merge_rules instead (filestore.merge_engine says what each engine does).
- Table without a primary key: the key is the whole row, the value a count; records of equal rows apply in
  sequence order, each moving the count to max(0, count + delta) (ADD +n, DELETE -n): a retraction of a row that is
  not there is ignored (filestore.countmerge says why merges of any contiguous runs stay exact). A row with count n
  reads as n rows.

`final=False` (flush, partial compaction) keeps DELETE winners: older runs that are not part of the merge may still
hold the key. `final=True` (read, full compaction of every run) drops them.
A non-final merge leaves at most two records per row of a count table (see filestore.countmerge); a final one
leaves the row's count, dropping zero counts.
`newest_run_winners` is `merge_primary_key`'s answer for records that are whole runs with disjoint sequence ranges
(reads and compactions of an LSM bucket), found by run order instead of sequence numbers.
The output is sorted by key: it is a sorted run. Everything is vectorised (Arrow sort/group_by, numpy), no
per-row Python.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore.countmerge import fold_counts
from filestore.keycodec_columns import signed_int_values, stored_as_signed_int
from filestore.merge_engine import MergeEngine
from filestore.merge_keys import COUNT as COUNT  # re-exported: the record columns
from filestore.merge_keys import KIND as KIND
from filestore.merge_keys import SEQ as SEQ
from filestore.merge_keys import first_of_each_key as _first_of_each_key
from filestore.merge_rules import merge_by_engine
from filestore.meta import ValueKind


def merge(records: pa.Table, key_columns: Sequence[str], *, primary_key: bool, final: bool,
          engine: MergeEngine | None = None) -> pa.Table:
    """`engine`: the table's merge engine (None: deduplicate); any other than plain deduplication merges by
    filestore.merge_rules."""
    if primary_key and engine is not None and not engine.is_default:
        return merge_by_engine(records, key_columns, engine, final=final)
    if primary_key:
        return merge_primary_key(records, key_columns, final=final)
    return merge_counts(records, key_columns, final=final)


def strictly_sorted(records: pa.Table, key_columns: Sequence[str]) -> bool:
    """Whether every row's key is greater than the previous row's (so the keys are sorted and unique): such records
    are their own merge. NaN and nulls compare false, so records holding them take the general path."""
    n = records.num_rows
    if n < 2:
        return True
    if n > 4096 and not strictly_sorted(records.slice(0, 4096), key_columns):
        return False  # unsorted input shows it early: spare the full comparison
    greater = pa.array(np.zeros(n - 1, dtype=bool))
    equal_so_far = pa.array(np.ones(n - 1, dtype=bool))
    for name in key_columns:
        col = records.column(name)
        cur, prev = col.slice(1), col.slice(0, n - 1)
        try:
            gt, eq = pc.greater(cur, prev), pc.equal(cur, prev)
        except (pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return False
        greater = pc.or_(greater, pc.and_(equal_so_far, pc.fill_null(gt, False)))
        equal_so_far = pc.and_(equal_so_far, pc.fill_null(eq, False))
    return bool(pc.all(greater).as_py())


def merge_primary_key(records: pa.Table, key_columns: Sequence[str], *, final: bool) -> pa.Table:
    if records.num_rows == 0:
        return records
    winners = merge_primary_key_winners(records, key_columns, final=final)
    return records if winners is None else records.take(winners)


def merge_primary_key_winners(records: pa.Table, key_columns: Sequence[str], *, final: bool) -> pa.Array | None:
    """The rows of `records` that `merge_primary_key` returns, as indices in output order (None: every row, as it
    is). `records` needs only the key columns, SEQ and KIND, so a caller can take the full rows once (the flush)."""
    if records.num_rows == 0:
        return None
    winners: pa.Array | None
    if strictly_sorted(records, key_columns):
        winners = None  # one record per key, already in key order (e.g. a flush of rows sorted by the user)
    elif (by_integer_key := _integer_key_winners(records, key_columns)) is not None:
        winners = by_integer_key
    else:
        # sort only the key and sequence columns, find each key's first (newest) record
        sort_keys = [(k, "ascending") for k in key_columns] + [(SEQ, "descending")]
        order = pc.sort_indices(records.select([*key_columns, SEQ]), sort_keys=sort_keys)
        first = _first_of_each_key(records.select(list(key_columns)).take(order), key_columns)
        winners = order.filter(pa.array(first))
    if final:
        kinds = records.column(KIND) if winners is None else records.column(KIND).take(winners)
        keep = pc.equal(kinds, pa.scalar(int(ValueKind.ADD), pa.int8()))
        if not pc.all(keep).as_py():
            everything = pa.array(np.arange(records.num_rows, dtype=np.int64))
            winners = (everything if winners is None else winners).filter(keep)
    return winners


def _integer_key_winners(records: pa.Table, key_columns: Sequence[str]) -> pa.Array | None:
    """`merge_primary_key_winners`' non-final answer for records whose one key column holds integers (or temporal
    values stored as integers), by numpy's sort (faster than Arrow's two-column sort): the keys sorted, then of a
    key with several records the one with the highest sequence number. None when that does not apply."""
    if len(key_columns) != 1:
        return None
    column = records.column(key_columns[0])
    if column.null_count or not stored_as_signed_int(column.type) or len(column) < 2:
        return None
    values = signed_int_values(column.chunk(0) if column.num_chunks == 1 else column.combine_chunks())  # no copy
    order = sorting_order(values)  # ties in any order: equal keys are resolved by sequence number below
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    if len(starts) == len(order):
        return pa.array(order)  # every key once
    seq = records.column(SEQ).to_numpy()[order]
    newest = np.maximum.reduceat(seq, starts)
    sizes = np.diff(np.append(starts, len(order)))
    return pa.array(order[seq == np.repeat(newest, sizes)])  # sequence numbers are unique: one winner per key


def newest_run_winners(
    keys: np.ndarray, run_lengths: Sequence[int], kinds: np.ndarray | None, *, final: bool
) -> np.ndarray | None:
    """`merge_primary_key_winners` without sequence numbers, for records concatenated run after run (`run_lengths`
    records each), every record of a later run newer (a higher sequence number) than every record of an earlier
    one (the caller checks that on the runs' sequence ranges): `keys` the values of the one integer key column,
    `kinds` the records' value kinds (None: all ADD). A key's newest record is then its last one in the
    concatenation, which a stable sort of the keys keeps last among equal keys (few sorted runs are merged by
    numpy's stable sort in about a linear pass). Indices in key order; None when a run's keys are not strictly
    increasing (not a sorted run: the caller merges by sequence numbers)."""
    order = run_order(keys, run_lengths)
    if order is None:
        return None
    ordered = np.take(keys, order)
    last = np.ones(len(keys), dtype=bool)  # the last record of each key in key order: its newest
    np.not_equal(ordered[1:], ordered[:-1], out=last[:-1])
    if final and kinds is not None and kinds.any():
        last &= np.take(kinds, order) == int(ValueKind.ADD)
    return order if last.all() else order[last]


def run_order(keys: np.ndarray, run_lengths: Sequence[int]) -> np.ndarray | None:
    """Indices sorting records concatenated run after run, oldest run first (`run_lengths` records each), by key
    and then by run: the order a key's records apply in (their sequence numbers' order). None when a run's keys are
    not strictly increasing (not a sorted run)."""
    start = 0
    for length in run_lengths:
        run = keys[start:start + length]
        start += length
        if length > 1 and not bool(np.all(run[1:] > run[:-1])):
            return None
    return np.argsort(keys, kind="stable")


_FEW_DESCENTS = 1024


def sorting_order(values: np.ndarray) -> np.ndarray:
    """Indices that sort the integers `values` ascending; equal values in any order. Records concatenated from a
    few sorted runs (a read or compaction merge) are merged by numpy's stable sort, which finds the runs; keys in
    random order (a flush) are sorted as one uint64 each, the key's offset from the minimum shifted above the row
    number (a sort of plain integers is faster than an argsort), when both fit 64 bits; else by an argsort."""
    n = len(values)
    if n < 2:
        return np.arange(n, dtype=np.intp)
    if np.count_nonzero(values[1:] < values[:-1]) < _FEW_DESCENTS:
        return np.argsort(values, kind="stable")
    wide = values.astype(np.int64, copy=False)
    lo, hi = int(wide.min()), int(wide.max())
    row_bits = (n - 1).bit_length()
    if (hi - lo).bit_length() + row_bits > 64:
        return np.argsort(values)
    packed = wide.view(np.uint64) - np.uint64(lo & (2**64 - 1))  # hi - lo < 2**64: exact, wrapping as unsigned
    packed <<= np.uint64(row_bits)
    packed |= np.arange(n, dtype=np.uint64)
    packed.sort()
    packed &= np.uint64((1 << row_bits) - 1)
    return packed.astype(np.intp)


def merge_counts(records: pa.Table, row_columns: Sequence[str], *, final: bool) -> pa.Table:
    if records.num_rows == 0:
        return records
    if pc.min(records.column(COUNT)).as_py() >= 0:  # nothing retracts: the counts simply add up (hash, no sort)
        return _sum_counts(records, row_columns)
    order = pc.sort_indices(records, sort_keys=[(c, "ascending") for c in row_columns] + [(SEQ, "ascending")])
    ordered = records.take(order)
    rows, seq, count = fold_counts(ordered.column(SEQ).to_numpy(), ordered.column(COUNT).to_numpy(),
                                   _first_of_each_key(ordered, row_columns), final=final)
    out = ordered.take(pa.array(rows))
    for name, values in ((SEQ, seq), (COUNT, count)):
        i = out.schema.get_field_index(name)
        out = out.set_column(i, out.schema.field(i), pa.array(values, out.schema.field(i).type))
    return out


def _sum_counts(records: pa.Table, row_columns: Sequence[str]) -> pa.Table:
    grouped = records.group_by(list(row_columns), use_threads=False).aggregate([(COUNT, "sum"), (SEQ, "max")])
    out = pa.table(
        {
            **{c: grouped.column(c) for c in row_columns},
            SEQ: grouped.column(f"{SEQ}_max"),
            KIND: pa.array(np.full(grouped.num_rows, int(ValueKind.ADD), dtype=np.int8)),
            COUNT: grouped.column(f"{COUNT}_sum"),
        }
    )
    out = out.select([n for n in records.schema.names if n in out.schema.names]).cast(
        pa.schema([records.schema.field(n) for n in records.schema.names if n in out.schema.names])
    )
    out = out.filter(pc.not_equal(out.column(COUNT), 0))
    return out.take(pc.sort_indices(out, sort_keys=[(c, "ascending") for c in row_columns]))


def expand_counts(merged: pa.Table) -> pa.Table:
    """A row with count n becomes n rows, count <= 0 none (tables without a primary key, after a final merge)."""
    counts = merged.column(COUNT).to_numpy()
    if merged.num_rows == 0 or bool((counts == 1).all()):
        return merged
    return merged.take(pa.array(np.repeat(np.arange(merged.num_rows), np.maximum(counts, 0))))
