"""Unchanged values in a changelog write: a change data capture source that does not know a column's value in an
update sends a placeholder instead (Debezium's `__debezium_unavailable_value` for a PostgreSQL column stored out of
line, TOASTed, that the update left alone under `REPLICA IDENTITY DEFAULT`). A placeholder is never written: the
write path (FileStoreWrite.prepare) replaces it before the memtable, so no data file, no log record and no reader
ever sees one.

The rule (its one owner; the table option `ingest.unavailable-value-placeholder` names the text, empty: off):
1. In a changelog write (rows with row kinds), a cell of a value column whose value is the placeholder in the
   column's type (`placeholder_of`: the text for a string, its UTF-8 bytes for a binary, `[text]` for a list of
   strings, the text's bytes as numbers for a list of integers: what Debezium sends for each) is not a value: the
   change leaves that column as it was.
2. Where the table's merge replaces a column's value with the newest one (`deduplicate`, an aggregation's
   `last_value`), the cell takes the key's value before the change: the latest earlier row of the same key in this
   write whose cell is a value, else the key's row in the table (the write's base snapshot and the runs this writer
   has flushed since), else null (the table has no row for the key: nothing is known of the value).
3. Where the merge keeps the older value when given a null (`partial-update`, an aggregation's other functions),
   or ignores later rows (`first-row`), the cell becomes null.
Vectorised: one comparison per candidate column finds the cells; a stable sort of the rows' key codes and a running
maximum find, for each, the row it takes its value from; one lookup of the keys left reads the table.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore.keycodec import KeyCodec
from filestore.merge_engine import MergeEngine

Lookup = Callable[[np.ndarray, Sequence[str]], pa.Table]
"""(rows of the write that need their key's stored values, columns) -> those columns of the key's row in the table,
one row per given row, null where the table has no row for the key."""


def placeholder_of(type_: pa.DataType, text: str) -> list[object] | str | bytes | None:
    """The placeholder as a value of a column of `type_`, as Debezium sends it; None where a column of that type
    cannot hold one (numbers, dates, ...: PostgreSQL never stores them out of line)."""
    t = pa.types
    if t.is_string(type_) or t.is_large_string(type_):
        return text
    if t.is_binary(type_) or t.is_large_binary(type_):
        return text.encode()
    if t.is_list(type_) or t.is_large_list(type_):
        item = type_.value_type
        if t.is_string(item) or t.is_large_string(item):
            return [text]
        if t.is_integer(item):
            return list(text.encode())
    return None


def unchanged_cells(data: pa.Table, columns: Sequence[str], text: str) -> dict[str, np.ndarray]:
    """Per column of `columns` holding at least one placeholder: the mask of its placeholder cells."""
    found: dict[str, np.ndarray] = {}
    for name in columns:
        column = data.column(name)
        value = placeholder_of(column.type, text)
        if value is None or column.null_count == len(column):
            continue
        if isinstance(value, list):
            mask = _list_equal(column, value)
        else:
            mask = pc.fill_null(pc.equal(column, pa.scalar(value, column.type)), False).to_numpy(zero_copy_only=False)
        if mask.any():
            found[name] = mask
    return found


def _list_equal(column: pa.ChunkedArray, value: list[object]) -> np.ndarray:
    """The rows of a list column equal to `value` (a short list): rows of its length, then their items compared."""
    column = column.combine_chunks()
    lengths = pc.fill_null(pc.list_value_length(column), -1).to_numpy(zero_copy_only=False)
    rows = np.flatnonzero(lengths == len(value))
    mask = np.zeros(len(column), dtype=bool)
    if len(rows) == 0 or not value:
        return mask
    items = pc.list_flatten(column.take(pa.array(rows)))
    same = pc.fill_null(pc.equal(items, pa.array(value * len(rows), items.type)), False)
    mask[rows] = same.to_numpy(zero_copy_only=False).reshape(len(rows), len(value)).all(axis=1)
    return mask


def replaces(engine: MergeEngine, column: str) -> bool:
    """Whether the merge gives a key's column its newest value, nulls included (rule 2), rather than keeping the
    older value for a null or ignoring later rows (rule 3)."""
    if engine.name == "deduplicate":
        return True
    return engine.name == "aggregation" and engine.function(column) == "last_value"


def fill_unchanged(data: pa.Table, cells: dict[str, np.ndarray], key_columns: Sequence[str], engine: MergeEngine,
                   lookup: Lookup) -> pa.Table:
    """`data` with its placeholder `cells` (unchanged_cells) replaced by the rule above."""
    filled = data
    replacing = {name: mask for name, mask in cells.items() if replaces(engine, name)}
    for name, mask in cells.items():
        if name not in replacing:
            column = data.column(name)
            filled = filled.set_column(filled.schema.get_field_index(name), name,
                                       pc.if_else(pa.array(mask), pa.nulls(len(mask), column.type), column))
    if not replacing:
        return filled
    n = data.num_rows
    codec = KeyCodec([data.schema.field(k).type for k in key_columns])
    encoded = codec.encode_columns([data.column(k) for k in key_columns])
    if isinstance(encoded, pa.ChunkedArray):
        encoded = encoded.combine_chunks()
    key_codes = pc.dictionary_encode(encoded).indices.to_numpy(zero_copy_only=False)
    order = np.argsort(key_codes, kind="stable")
    sorted_codes = key_codes[order]
    group_start = np.zeros(n, dtype=np.int64)
    starts = np.flatnonzero(np.diff(sorted_codes)) + 1
    group_start[starts] = starts
    group_start = np.maximum.accumulate(group_start)   # per sorted position: where its key's rows start
    positions = np.arange(n)
    sources: dict[str, np.ndarray] = {}
    unresolved = np.zeros(n, dtype=bool)
    for name, mask in replacing.items():
        valid = ~mask[order]
        latest = np.maximum.accumulate(np.where(valid, positions, -1))   # the latest valid row at or before each
        source = np.where(mask, -1, np.arange(n))   # per row: the row it takes its value from (-1: the table's)
        earlier = latest >= group_start
        placeholder = ~valid
        source[order[placeholder & earlier]] = order[latest[placeholder & earlier]]
        sources[name] = source
        unresolved |= source < 0
    rows = np.flatnonzero(unresolved)
    stored = lookup(rows, list(replacing)) if len(rows) else None
    at = np.full(n, -1, dtype=np.int64)
    at[rows] = np.arange(len(rows))
    for name, source in sources.items():
        column = data.column(name).combine_chunks()
        values = column if stored is None else pa.concat_arrays([column, stored.column(name).combine_chunks()
                                                                  .cast(column.type)])
        take = np.where(source >= 0, source, n + at)
        filled = filled.set_column(filled.schema.get_field_index(name), name, values.take(pa.array(take)))
    return filled


def match_keys(rows: pa.Table, found: pa.Table, key_columns: Sequence[str], columns: Sequence[str]) -> pa.Table:
    """`columns` of the row of `found` with the same key as each row of `rows` (null where none): the lookup's
    answer put back in the order it was asked in."""
    codec = KeyCodec([rows.schema.field(k).type for k in key_columns])
    wanted = codec.encode_columns([rows.column(k) for k in key_columns])
    have = codec.encode_columns([found.column(k) for k in key_columns])
    index = pc.index_in(wanted, value_set=have)
    return pa.table({c: found.column(c).take(index) for c in columns})
