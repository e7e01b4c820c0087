"""The merge-engine options of a new table checked against its schema (`merge-engine`, `sequence.field`,
`fields.<column>.aggregate-function`: declared in catalog.options, applied by filestore.merge_engine), once, at
`create_table`: every problem is a MergeEngineOptionError naming the table, the option and the column."""
from __future__ import annotations

import difflib
from typing import Sequence

import pyarrow as pa

from catalog.errors import MergeEngineOptionError, SchemaEvolutionError
from catalog.options import DELETION_VECTORS, FIELDS, MERGE_ENGINE, SEQUENCE_FIELD
from catalog.table_options import AGGREGATE_SUFFIX, TableOptions
from filestore import AGGREGATE_FUNCTIONS, ORDER_FREE, MergeEngine, unsuitable_type


def _hint(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _error(table: str, option: str, message: str, column: str | None = None) -> MergeEngineOptionError:
    return MergeEngineOptionError(f"table {table!r}: option {option!r}: {message}", table=table, option=option,
                                  column=column)


def check_merge_options(table: str, schema: pa.Schema, primary_keys: Sequence[str], options: TableOptions) -> None:
    """MergeEngineOptionError unless the table's merge-engine options fit its schema and primary key."""
    engine = options.merge_engine()
    engine_option = MERGE_ENGINE.key if engine.name != "deduplicate" else SEQUENCE_FIELD.key
    if not engine.is_default and not primary_keys:
        raise _error(table, engine_option, "needs a primary key (a table without one counts its rows)")
    _check_fields(table, schema, primary_keys, options.map_option(FIELDS), engine)
    _check_sequence_fields(table, schema, primary_keys, engine)
    if options.get(DELETION_VECTORS):
        why = ("needs a primary key" if not primary_keys else
               f"needs the deduplicate merge engine without {SEQUENCE_FIELD.key} (a commit marks a key's older rows "
               "deleted by arrival order)" if not engine.is_default else None)
        if why:
            raise _error(table, DELETION_VECTORS.key, why)


def _check_fields(table: str, schema: pa.Schema, primary_keys: Sequence[str], fields: dict[str, str],
                  engine: MergeEngine) -> None:
    names = schema.names
    for key in fields:
        option = f"{FIELDS.key}.{key}"
        if not key.endswith(AGGREGATE_SUFFIX):
            suffix = "." + key.rsplit(".", 1)[-1]
            raise _error(table, option, f"unknown per-column option{_hint(suffix, [AGGREGATE_SUFFIX])}; valid: "
                         f"fields.<column>{AGGREGATE_SUFFIX}")
        column = key[: -len(AGGREGATE_SUFFIX)]
        if column not in names:
            raise _error(table, option, f"no column {column!r}{_hint(column, names)}; columns: {names}", column)
        if engine.name != "aggregation":
            raise _error(table, option, f"aggregate functions apply to merge-engine aggregation, not {engine.name}",
                         column)
        if column in primary_keys:
            raise _error(table, option, f"column {column!r} is part of the primary key, which is never aggregated",
                         column)
    for column, function in engine.aggregates:
        option = f"{FIELDS.key}.{column}{AGGREGATE_SUFFIX}"
        if function not in AGGREGATE_FUNCTIONS:
            raise _error(table, option, f"unknown aggregate function {function!r}"
                         f"{_hint(function, AGGREGATE_FUNCTIONS)}; valid: {', '.join(AGGREGATE_FUNCTIONS)}", column)
        reason = unsuitable_type(function, schema.field(column).type)
        if reason is not None:
            raise _error(table, option, f"column {column!r} is of type {schema.field(column).type}: {reason}",
                         column)


def _check_sequence_fields(table: str, schema: pa.Schema, primary_keys: Sequence[str], engine: MergeEngine) -> None:
    if not engine.sequence_fields:
        return
    key, names = SEQUENCE_FIELD.key, schema.names
    if engine.name == "first-row":
        raise _error(table, key, "first-row keeps a key's first row by arrival; it takes no sequence.field")
    if engine.name == "partial-update":
        raise _error(table, key, "partial-update takes no sequence.field: a column's newest non-null value by a "
                     "sequence.field would depend on which rows compaction had merged (Paimon's sequence groups "
                     "are not supported)")
    aggregates = dict(engine.aggregates)
    for column in engine.sequence_fields:
        if column not in names:
            raise _error(table, key, f"no column {column!r}{_hint(column, names)}; columns: {names}", column)
        if column in primary_keys:
            raise _error(table, key, f"column {column!r} is part of the primary key: it cannot order a key's rows",
                         column)
        if unsuitable_type("max", schema.field(column).type) is not None:
            raise _error(table, key, f"column {column!r} is of type {schema.field(column).type}, which has no "
                         "order", column)
        if column in aggregates:
            raise _error(table, key, f"column {column!r} orders the rows: it takes no aggregate function", column)
    if engine.name != "aggregation":
        return
    for column in names:
        if column in primary_keys or column in engine.sequence_fields:
            continue
        function = engine.function(column)
        if function not in ORDER_FREE:
            raise _error(table, key, f"column {column!r} aggregates with {function}"
                         + (" (the default)" if column not in aggregates else "")
                         + ", whose result would depend on which rows compaction had merged when rows are ordered "
                         f"by a sequence.field; give it one of {', '.join(ORDER_FREE)}", column)


def check_added_columns(table: str, options: TableOptions, added: Sequence[str]) -> None:
    """SchemaEvolutionError when columns are added to an aggregation table ordered by a sequence.field: a new
    column takes the default function (last_non_null_value), which such a table cannot merge exactly, and its
    function cannot be set after creation."""
    engine = options.merge_engine()
    if added and engine.name == "aggregation" and engine.sequence_fields:
        raise SchemaEvolutionError(
            f"table {table!r}: columns {list(added)} cannot be added to an aggregation table with a sequence.field: "
            "they would aggregate with last_non_null_value, whose result would depend on which rows compaction had "
            "merged", table=table, column=", ".join(added))
