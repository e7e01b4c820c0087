"""Spark's pushed filters -> Arrow expressions for the file store's planning and reading.

Spark hands a Python data source a conjunction of simple filters (`pyspark.sql.datasource.Filter`). Each one that
translates is used twice:
- for *pruning* (partitions, and files by their key range / column statistics in `FileStoreScan.plan`), always;
- as an *exact* row filter applied in Arrow after the merge, and then removed from Spark's plan, only where Arrow
  and Spark agree on every value: not for floating-point columns (Spark orders NaN above every number and NaN =
  NaN; Arrow compares NaN false) nor timestamps (the filter's Python datetime carries no reliable zone).
Filters kept by Spark go back to it unchanged; Spark evaluates them on the rows the source returns. Filtering in
Arrow before rows cross into the JVM is cheaper than Spark's filter after the crossing, so every exact filter stays
here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc


@dataclass(frozen=True)
class Translated:
    prune: pc.Expression | None
    """Conjunction of every translated filter (for planning)."""
    exact: pc.Expression | None
    """Conjunction of the filters this source applies exactly (for reading)."""
    kept: tuple[int, ...]
    """Indices of the input filters Spark must still evaluate."""


def _column(attribute: tuple[str, ...], schema: pa.Schema) -> str | None:
    if len(attribute) != 1 or attribute[0] not in schema.names:
        return None   # a nested field: not in the statistics
    return attribute[0]


def _exact_type(type_: pa.DataType) -> bool:
    return not (pa.types.is_floating(type_) or pa.types.is_timestamp(type_) or pa.types.is_nested(type_))


def _scalar(value: Any, type_: pa.DataType) -> pa.Scalar:
    return pa.scalar(value, type_)


def _translate(f: Any, schema: pa.Schema) -> tuple[pc.Expression, bool] | None:
    """(expression, exact) for one filter, None when it does not translate."""
    from pyspark.sql import datasource as D

    if isinstance(f, D.Not):
        if isinstance(f.child, D.In):
            return None   # Arrow's is_in gives false for a null, Spark's IN gives null: NOT would differ
        inner = _translate(f.child, schema)
        return None if inner is None else (~inner[0], inner[1])
    name = _column(f.attribute, schema)
    if name is None:
        return None
    type_ = schema.field(name).type
    if pa.types.is_timestamp(type_) or pa.types.is_nested(type_):
        return None
    field = pc.field(name)
    exact = _exact_type(type_)
    try:
        if isinstance(f, D.IsNull):
            return field.is_null(), True
        if isinstance(f, D.IsNotNull):
            return field.is_valid(), True
        if isinstance(f, D.EqualNullSafe):
            if f.value is None:
                return field.is_null(), True
            return pc.Expression._call("coalesce", [field == _scalar(f.value, type_), pc.scalar(False)]), exact
        comparisons: dict[type, str] = {D.EqualTo: "equal", D.GreaterThan: "greater", D.GreaterThanOrEqual: "greater_equal",
                       D.LessThan: "less", D.LessThanOrEqual: "less_equal"}
        for cls, function in comparisons.items():
            if isinstance(f, cls):
                value = getattr(f, "value")
                if value is None:
                    return None
                return pc.Expression._call(function, [field, _scalar(value, type_)]), exact
        if isinstance(f, D.In):
            values = [v for v in f.value if v is not None]
            if len(values) != len(f.value) or not values:
                return None
            return field.isin(pa.array(values, type_)), exact
        if isinstance(f, (D.StringStartsWith, D.StringEndsWith, D.StringContains)) and pa.types.is_string(type_):
            function = {D.StringStartsWith: "starts_with", D.StringEndsWith: "ends_with",
                        D.StringContains: "match_substring"}[type(f)]
            return pc.Expression._call(function, [field], pc.MatchSubstringOptions(f.value)), exact
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return None   # a value that does not fit the column's type: Spark evaluates it
    return None


def columns_of(f: Any) -> set[str]:
    """The top-level columns one pushed filter names."""
    from pyspark.sql import datasource as D

    if isinstance(f, D.Not):
        return columns_of(f.child)
    return {f.attribute[0]} if getattr(f, "attribute", ()) else set()


def _conjunction(terms: Sequence[pc.Expression]) -> pc.Expression | None:
    if not terms:
        return None
    out = terms[0]
    for t in terms[1:]:
        out = out & t
    return out


def translate(filters: Sequence[Any], schema: pa.Schema) -> Translated:
    """Split Spark's pushed `filters` over a table of Arrow `schema` (see the module's rules)."""
    prune: list[pc.Expression] = []
    exact: list[pc.Expression] = []
    kept: list[int] = []
    for i, f in enumerate(filters):
        done = _translate(f, schema)
        if done is None:
            kept.append(i)
            continue
        prune.append(done[0])
        if done[1]:
            exact.append(done[0])
        else:
            kept.append(i)
    return Translated(_conjunction(prune), _conjunction(exact), tuple(kept))


_V1 = {"=": "EqualTo", "<=>": "EqualNullSafe", ">": "GreaterThan", ">=": "GreaterThanOrEqual", "<": "LessThan",
       "<=": "LessThanOrEqual", "IS_NULL": "IsNull", "IS_NOT_NULL": "IsNotNull", "STARTS_WITH": "StringStartsWith",
       "ENDS_WITH": "StringEndsWith", "CONTAINS": "StringContains"}


def from_predicate(node: Mapping[str, Any]) -> Any | None:
    """One of Spark's pushed filters as the JVM hands it to the catalog service (the filter's V2 form, a node of the
    `predicates` hand-over format, tablestore.spark.predicates) -> the `pyspark.sql.datasource` filter a Python data
    source gets for it; None when it has no such form (Spark keeps it)."""
    from pyspark.sql import datasource as D

    from tablestore.spark.predicates import PredicateError, literal

    op = str(node.get("op", "")).upper()
    args = list(node.get("args") or [])
    if op == "NOT" and len(args) == 1:
        child = from_predicate(args[0])
        return None if child is None else D.Not(child)
    if not args or "ref" not in args[0] or any("lit" not in a for a in args[1:]):
        return None
    column = tuple(str(p) for p in args[0]["ref"])
    try:
        values = [literal(a).as_py() for a in args[1:]]
    except (PredicateError, ValueError, TypeError, OverflowError, pa.ArrowException):
        return None
    if op == "IN":
        return D.In(column, tuple(values))
    name = _V1.get(op)
    if name is None or len(values) != (0 if op in ("IS_NULL", "IS_NOT_NULL") else 1):
        return None
    return getattr(D, name)(column, *values)


def translate_predicates(nodes: Sequence[Mapping[str, Any]], schema: pa.Schema) -> Translated:
    """`translate` of the filters Spark pushed to a JVM scan, in their hand-over form (`from_predicate`): the same
    rules as for a Python data source's; `kept` also holds the filters that have no Python form."""
    filters = [from_predicate(n) for n in nodes]
    present = [i for i, f in enumerate(filters) if f is not None]
    done = translate([filters[i] for i in present], schema)
    kept = {i for i, f in enumerate(filters) if f is None} | {present[k] for k in done.kept}
    return Translated(done.prune, done.exact, tuple(sorted(kept)))
