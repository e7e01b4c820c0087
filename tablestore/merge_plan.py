"""The changes of a MERGE (`Table.merge`, tablestore/merge.py), planned from the target's rows at one snapshot and the
source, vectorised: a Python loop runs over the clauses, never over rows.

1. The source's key columns are conformed to the table's types by the write's own rules (filestore.conform_column)
   and put in the key normal form (filestore.normalize_keys); the values written are cast by the same rules.
2. The keys of both sides are encoded with the table's key codec (filestore.KeyCodec: equal keys, equal bytes;
   a composite key is one binary value) and the (key, row number) pairs of the two sides are joined on them
   (pyarrow's hash join): inner with WHEN MATCHED clauses only, keeping the unmatched source rows with a WHEN NOT
   MATCHED clause and the unmatched target rows with a WHEN NOT MATCHED BY SOURCE clause. The rows themselves are
   taken by row number afterwards, so the join carries no value column.
3. With a WHEN MATCHED clause, a target row matched by more than one source row is an error naming its key
   (Spark's MERGE rule, as SQL MERGE INTO's): a merge makes at most one change per target row.
4. Each joined row takes the first clause of its kind whose predicate holds (a pyarrow compute expression over the
   joined row's fields `<target alias>.<column>` and `<source alias>.<column>`; a null predicate is false); the
   clause's values are evaluated over the rows it took (pyarrow Acero's project), one pass per clause.
5. The changes, as a changelog of the table's columns and `_row_kind`: per updated row `-U` (the old row) then `+U`
   (the new one), per deleted row `-D` (the old row), per inserted row `+I`, inserts in source order (of two source
   rows of one new key, the later wins, as in one write).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.acero as acero
import pyarrow.compute as pc

from filestore import KeyCodec, conform_column, normalize_keys
from logstore import ROW_KIND_COLUMN
from tablestore.errors import TableStoreError

When = Literal["matched", "not_matched", "not_matched_by_source"]
Action = Literal["update", "delete", "insert"]
_KEY, _T, _S = "__merge_key", "__merge_target_row", "__merge_source_row"


class MergeError(TableStoreError):
    """A MERGE cannot be planned: a clause names an unknown column or sets a primary-key column, the source lacks
    columns, or a target row is matched by more than one source row. Names the table; nothing was committed."""


@dataclass(frozen=True)
class Clause:
    """One WHEN clause: on `when` rows whose `predicate` holds (None: all), `action` with `values` (column ->
    expression, column name or literal; None: every column from the source, less `except_cols`)."""

    when: When
    action: Action
    predicate: pc.Expression | None = None
    values: tuple[tuple[str, object], ...] | None = None
    except_cols: tuple[str, ...] = ()

    def describe(self) -> str:
        what = {"matched": "WHEN MATCHED", "not_matched": "WHEN NOT MATCHED",
                "not_matched_by_source": "WHEN NOT MATCHED BY SOURCE"}[self.when]
        return f"{what} {self.action.upper()}{' ' + str(self.predicate) if self.predicate is not None else ''}"


@dataclass(frozen=True)
class MergeTarget:
    """The table a merge changes, as values: its name, schema and primary key."""

    name: str
    schema: pa.Schema
    primary_key: tuple[str, ...]


@dataclass(frozen=True)
class MergeChanges:
    """The changelog of a merge and how many target rows it updates, deletes and inserts."""

    changes: pa.Table
    updated: int
    deleted: int
    inserted: int


def conform_source(target: MergeTarget, source: pa.Table) -> pa.Table:
    """1. The source, its key columns cast to the table's types and in normal form (its other columns keep their
    types: predicates see them as given, and the values written are cast like a write's)."""
    missing = [k for k in target.primary_key if k not in source.schema.names]
    if missing:
        raise MergeError(f"MERGE INTO {target.name}: the source lacks the primary-key column(s) {missing}: a merge "
                         "matches source and target rows by the table's primary key")
    for key in target.primary_key:
        i, field = source.schema.get_field_index(key), target.schema.field(key)
        column = conform_column(target.name, key, source.column(i), field.type)
        source = source.set_column(i, pa.field(key, field.type), column)
    return normalize_keys(source, target.primary_key)


def plan_changes(target: MergeTarget, rows: pa.Table, source: pa.Table, clauses: Sequence[Clause], *,
                 target_alias: str, source_alias: str) -> MergeChanges:
    """The changes of merging `source` (conformed) into `rows` (the target's rows at the planned snapshot, at least
    those of the source's keys when there is no WHEN NOT MATCHED BY SOURCE clause)."""
    for clause in clauses:
        _check_clause(target, source, clause)
    kinds = {c.when for c in clauses}
    pairs = _join(target, rows, source, kinds)
    t_rows, s_rows = pairs.column(_T), pairs.column(_S)
    matched = pc.and_(pc.is_valid(t_rows), pc.is_valid(s_rows))
    if "matched" in kinds:
        _check_cardinality(target, rows, pc.filter(t_rows, matched), pc.filter(s_rows, matched))
    view_of = _Views(rows, source, target_alias, source_alias)
    groups: dict[When, pa.Table] = {
        "matched": pairs.filter(matched),
        "not_matched": pairs.filter(pc.is_null(t_rows)),
        "not_matched_by_source": pairs.filter(pc.is_null(s_rows)),
    }
    old_u, new_u, old_d, new_i = [], [], [], []
    for when in ("matched", "not_matched", "not_matched_by_source"):
        group = groups[when]
        mine = [c for c in clauses if c.when == when]
        if not mine or group.num_rows == 0:
            continue
        view = view_of(group)
        left = np.ones(group.num_rows, dtype=bool)   # rows no earlier clause took
        for clause in mine:
            taken = left & _holds(target, view, clause)
            left &= ~taken
            if not taken.any():
                continue
            rows_of = view.filter(pa.array(taken))
            if clause.action == "delete":
                old_d.append(_old(target, rows_of, target_alias))
            elif clause.action == "update":
                old_u.append(_old(target, rows_of, target_alias))
                new_u.append(_new(target, rows_of, clause, target_alias, source_alias))
            else:
                new_i.append(_new(target, rows_of, clause, target_alias, source_alias).append_column(
                    _S, rows_of.column(_S)))
    return _changelog(target.schema, old_u, new_u, old_d, new_i)


def _check_clause(target: MergeTarget, source: pa.Table, clause: Clause) -> None:
    def fail(why: str) -> MergeError:
        return MergeError(f"MERGE INTO {target.name}: {clause.describe()}: {why}")

    columns = target.schema.names
    if clause.values is None:
        unknown = [c for c in clause.except_cols if c not in columns]
        if unknown:
            raise fail(f"except_cols names {unknown}, which are not columns of the table ({columns})")
        needed = [c for c in columns if c not in clause.except_cols and not (
            clause.action == "update" and c in target.primary_key)]
        lacking = [c for c in needed if c not in source.schema.names]
        if lacking:
            raise fail(f"the source lacks the column(s) {lacking} it takes (give them, list them in except_cols, or "
                       "set the columns one by one)")
        if clause.action == "insert" and any(k in clause.except_cols for k in target.primary_key):
            raise fail(f"an insert needs the primary key {list(target.primary_key)}: keep it out of except_cols")
        return
    unknown = [c for c, _ in clause.values if c not in columns]
    if unknown:
        raise fail(f"sets {unknown}, which are not columns of the table ({columns})")
    keys = [c for c, _ in clause.values if c in target.primary_key]
    if clause.action == "update" and keys:
        raise fail(f"sets the primary-key column(s) {keys}: a primary key is not updated in place, a row under a new "
                   "key is a delete and an insert. Delete the old row (when_matched_delete) and insert the new one "
                   "(when_not_matched_insert)")
    unset = [k for k in target.primary_key if k not in dict(clause.values)]
    if clause.action == "insert" and unset:
        raise fail(f"does not set the primary-key column(s) {unset}: an inserted row needs its key")


def _join(target: MergeTarget, rows: pa.Table, source: pa.Table, kinds: set[When]) -> pa.Table:
    """2. (target row, source row) per joined pair; a null row number where a side has no row."""
    codec = KeyCodec([target.schema.field(k).type for k in target.primary_key])
    left = pa.table({_KEY: codec.encode_columns([rows.column(k) for k in target.primary_key]),
                     _T: pa.array(np.arange(rows.num_rows, dtype=np.int64))})
    right = pa.table({_KEY: codec.encode_columns([source.column(k) for k in target.primary_key]),
                      _S: pa.array(np.arange(source.num_rows, dtype=np.int64))})
    how = {(False, False): "inner", (True, False): "right outer", (False, True): "left outer",
           (True, True): "full outer"}["not_matched" in kinds, "not_matched_by_source" in kinds]
    return left.join(right, _KEY, join_type=how, use_threads=False).select([_T, _S])


def _check_cardinality(target: MergeTarget, rows: pa.Table, matched_t: pa.ChunkedArray,
                       matched_s: pa.ChunkedArray) -> None:
    """3. A target row more than one source row matched, as an error naming its key: the first such source row's."""
    if not len(matched_t):
        return
    t, s = matched_t.to_numpy(), matched_s.to_numpy()
    twice = np.bincount(t, minlength=rows.num_rows)[t] > 1
    if not twice.any():
        return
    first = int(t[twice][np.argmin(s[twice])])
    row = rows.slice(first, 1).to_pylist()[0]
    key = ", ".join(f"{k}={row[k]}" for k in target.primary_key)
    raise MergeError(f"MERGE INTO {target.name}: the target row with key {key} is matched by more than one source "
                     "row: each target row may match at most one (Spark's MERGE rule; MERGE_CARDINALITY_VIOLATION); "
                     f"remove the duplicate source rows of that key ({len(np.unique(t[twice]))} target row(s) are "
                     "matched so); nothing was committed")


class _Views:
    """The joined rows of a group as one table: `<target alias>.<column>` of the target's row and `<source alias>.
    <column>` of the source's (null where the row has no such side), with the row numbers."""

    def __init__(self, rows: pa.Table, source: pa.Table, target_alias: str, source_alias: str) -> None:
        self.rows, self.source = rows, source
        self.names = ([f"{target_alias}.{c}" for c in rows.schema.names]
                      + [f"{source_alias}.{c}" for c in source.schema.names])

    def __call__(self, group: pa.Table) -> pa.Table:
        t, s = group.column(_T), group.column(_S)
        sides = self.rows.take(t).columns + self.source.take(s).columns
        return pa.Table.from_arrays([*sides, t, s], names=[*self.names, _T, _S])


def _evaluate(target: MergeTarget, view: pa.Table, exprs: dict[str, pc.Expression], clause: Clause) -> pa.Table:
    """`exprs` over every row of `view`, in row order (Acero's project)."""
    try:
        plan = acero.Declaration.from_sequence([
            acero.Declaration("table_source", acero.TableSourceNodeOptions(view)),
            acero.Declaration("project", acero.ProjectNodeOptions(list(exprs.values()), list(exprs)))])
        return plan.to_table(use_threads=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        fields = ", ".join(n for n in view.schema.names if n not in (_T, _S))
        raise MergeError(f"MERGE INTO {target.name}: {clause.describe()}: {e} (the fields of a joined row: "
                         f"{fields})") from None


def _holds(target: MergeTarget, view: pa.Table, clause: Clause) -> np.ndarray:
    if clause.predicate is None:
        return np.ones(view.num_rows, dtype=bool)
    holds = _evaluate(target, view, {"holds": clause.predicate}, clause).column(0)
    if holds.type != pa.bool_():
        raise MergeError(f"MERGE INTO {target.name}: {clause.describe()}: the predicate is of type {holds.type}, "
                         "not boolean")
    return np.asarray(pc.fill_null(holds, False).to_numpy(zero_copy_only=False), dtype=bool)


def _old(target: MergeTarget, rows: pa.Table, target_alias: str) -> pa.Table:
    return pa.Table.from_arrays([rows.column(f"{target_alias}.{c}") for c in target.schema.names],
                                schema=target.schema)


def _expression(target: MergeTarget, view: pa.Table, clause: Clause, value: object) -> pc.Expression:
    """A clause's value: an expression as it is, a string the field of that name, anything else a literal."""
    if isinstance(value, pc.Expression):
        return value
    if isinstance(value, str):
        if value not in view.schema.names:
            fields = ", ".join(n for n in view.schema.names if n not in (_T, _S))
            raise MergeError(f"MERGE INTO {target.name}: {clause.describe()}: no field {value!r} in a joined row "
                             f"({fields}; a string value names a field: give a string literal as pc.scalar(...))")
        return pc.field(value)
    return pc.scalar(value)


def _new(target: MergeTarget, rows: pa.Table, clause: Clause, target_alias: str, source_alias: str) -> pa.Table:
    """The new rows a clause makes of `rows` (the joined rows it took), in the table's types."""
    if clause.values is None:   # update_all / insert_all
        keep = clause.action == "update"   # an update keeps the target's key (the source's is equal to it)
        exprs = {c: pc.field(f"{target_alias}.{c}" if (keep and c in target.primary_key)
                              or c in clause.except_cols else f"{source_alias}.{c}") for c in target.schema.names}
        if not keep:   # an insert's left-out columns are null
            exprs = {c: pc.scalar(None) if c in clause.except_cols else e for c, e in exprs.items()}
    else:
        given = {c: _expression(target, rows, clause, v) for c, v in clause.values}
        exprs = {c: given.get(c, pc.field(f"{target_alias}.{c}") if clause.action == "update" else pc.scalar(None))
                 for c in target.schema.names}
    values = _evaluate(target, rows, exprs, clause)
    columns = [conform_column(target.name, f.name, values.column(f.name), f.type) for f in target.schema]
    return pa.Table.from_arrays(columns, schema=target.schema)


def _with_kind(table: pa.Table, kind: str) -> pa.Table:
    return table.add_column(0, ROW_KIND_COLUMN, pa.repeat(pa.scalar(kind, pa.string()), table.num_rows))


def _changelog(schema: pa.Schema, old_u: list[pa.Table], new_u: list[pa.Table], old_d: list[pa.Table],
               new_i: list[pa.Table]) -> MergeChanges:
    """5. -U/+U pairs (adjacent), then -D, then +I in source order."""
    empty = schema.empty_table()
    before, after = pa.concat_tables([empty, *old_u]), pa.concat_tables([empty, *new_u])
    n = before.num_rows
    updates = pa.concat_tables([_with_kind(before, "-U"), _with_kind(after, "+U")])
    order = np.empty(2 * n, dtype=np.int64)
    order[0::2], order[1::2] = np.arange(n), np.arange(n, 2 * n)
    updates = updates.take(pa.array(order))
    deletes = _with_kind(pa.concat_tables([empty, *old_d]), "-D")
    inserts = pa.concat_tables(new_i) if new_i else empty.append_column(_S, pa.array([], pa.int64()))
    inserts = inserts.take(pc.sort_indices(inserts, [(_S, "ascending")])).drop_columns([_S])
    changes = pa.concat_tables([updates, deletes, _with_kind(inserts, "+I")])
    return MergeChanges(changes, n, deletes.num_rows, inserts.num_rows)
