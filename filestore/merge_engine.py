"""Merge engines: how the records of one primary key combine into its row (Paimon's `merge-engine`), as a frozen
value the catalog parses from the table's options (`merge-engine`, `sequence.field`,
`fields.<column>.aggregate-function`) and the file store applies in its one merge (filestore.merge ->
filestore.merge_rules) at flush, compaction and read alike.

Engines (on-disk option values):
- `deduplicate`: the newest record of a key wins; a winning DELETE removes the key (the default).
- `partial-update`: each non-key column takes the newest non-null value among the key's records (a null keeps the
  older value). `-U`/`-D` rows are refused at write (RetractionNotSupportedError).
- `aggregation`: each non-key column is the aggregate (`AGGREGATE_FUNCTIONS`) of the key's values; a `-U`/`-D` row
  retracts its values where the column's function can (`RETRACTING`), and is refused at write where one cannot.
  The key's row never disappears: a retraction is an input of the aggregates, not a delete.
- `first-row`: the oldest record of a key wins, later ones are dropped. `-U`/`-D` rows are refused at write.

Order. A key's records apply in sequence-number order (arrival), or, with `sequence.field`, by those columns (nulls
first), ties broken by sequence number. A merged record stands at the newest position of the records it merged:
merges of contiguous sequence ranges (flush: the memtable, compaction: newest runs) then compose exactly. That holds
for an order by `sequence.field` only where the result depends on the newest record alone (deduplicate, and the
aggregate functions sum, count, max, min, bool_and, bool_or and last_value), so the catalog refuses the others with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore.errors import RetractionNotSupportedError
from filestore.meta import ValueKind

EngineName = Literal["deduplicate", "partial-update", "aggregation", "first-row"]
ENGINES: tuple[EngineName, ...] = ("deduplicate", "partial-update", "aggregation", "first-row")
AGGREGATE_FUNCTIONS = ("sum", "max", "min", "last_value", "last_non_null_value", "first_value",
                       "first_non_null_value", "count", "bool_and", "bool_or")
DEFAULT_AGGREGATE = "last_non_null_value"
RETRACTING = ("sum", "count", "last_value")
"""Aggregate functions a `-U`/`-D` row retracts from: sum subtracts, count counts down, last_value becomes null."""
ORDER_FREE = ("sum", "count", "max", "min", "bool_and", "bool_or", "last_value")
"""Aggregate functions whose result stays exact when rows are ordered by `sequence.field` (see the docstring)."""


@dataclass(frozen=True)
class MergeEngine:
    """The merge engine of a primary-key table. `aggregates`: (column, function) for the columns given one
    (aggregation; the others take DEFAULT_AGGREGATE)."""

    name: EngineName = "deduplicate"
    sequence_fields: tuple[str, ...] = ()
    aggregates: tuple[tuple[str, str], ...] = ()

    @property
    def is_default(self) -> bool:
        """Plain deduplication by arrival: the merge's fast paths (run order, key-only flush) apply."""
        return self.name == "deduplicate" and not self.sequence_fields

    def function(self, column: str) -> str:
        """The aggregate function of a value column (aggregation), or what partial-update amounts to per column."""
        if self.name == "partial-update":
            return "last_non_null_value"
        return dict(self.aggregates).get(column, DEFAULT_AGGREGATE)


def unsuitable_type(function: str, type_: pa.DataType) -> str | None:
    """Why `function` cannot aggregate a column of `type_` (None: it can)."""
    t = pa.types
    if function == "sum" and not (t.is_signed_integer(type_) or t.is_floating(type_) or t.is_decimal(type_)):
        return "sum needs a signed integer, floating point or decimal column"
    if function == "count" and not t.is_signed_integer(type_):
        return "count needs a signed integer column (it holds the count)"
    if function in ("bool_and", "bool_or") and not t.is_boolean(type_):
        return f"{function} needs a boolean column"
    if function in ("max", "min") and not (t.is_integer(type_) or t.is_floating(type_) or t.is_decimal(type_)
                                          or t.is_string(type_) or t.is_large_string(type_) or t.is_binary(type_)
                                          or t.is_temporal(type_) or t.is_boolean(type_)):
        return f"{function} needs an ordered column (number, decimal, string, binary, boolean, date or time)"
    return None


def check_retractions(table: str, engine: MergeEngine, kinds: np.ndarray, value_columns: Sequence[str]) -> None:
    """RetractionNotSupportedError when rows of `kinds` (ValueKind per row) retract (`-U`/`-D`) and the engine, or
    the aggregate function of one of `value_columns`, cannot take that; nothing of the write is applied then."""
    if engine.name in ("deduplicate",) or not (kinds == int(ValueKind.DELETE)).any():
        return
    if engine.name in ("partial-update", "first-row"):
        raise RetractionNotSupportedError(table, engine.name, None, None)
    for column in value_columns:
        if column in engine.sequence_fields:
            continue  # an ordering column takes its newest row's value, a retraction's too
        function = engine.function(column)
        if function not in RETRACTING:
            raise RetractionNotSupportedError(table, engine.name, column, function)


def prepare_input(data: pa.Table, engine: MergeEngine) -> pa.Table:
    """Written rows as the merge's records hold them: a `count` column's value becomes 1 (a non-null input) or 0,
    so that merging merged records (counts) is a sum."""
    if engine.name != "aggregation":
        return data
    for column, function in engine.aggregates:
        if function == "count" and column in data.column_names:
            i = data.schema.get_field_index(column)
            field = data.schema.field(i)
            ones = pc.if_else(pc.is_valid(data.column(i)), 1, 0).cast(field.type)
            data = data.set_column(i, field, ones)
    return data
