"""Spark's V2 predicates, serialised as JSON by the JVM (`tablestore.spark.jvm.catalog.PredicateJson`), as Arrow
filters over a table's rows: what INSERT OVERWRITE ... PARTITION (...) and `writeTo(...).overwrite(cond)` replace,
and (for the row-level SQL commands) which rows a statement touches.

The JSON: a list of predicates, ANDed; each node is
    {"op": "=", "args": [...]}                     Spark's predicate or function name and its arguments
    {"ref": ["dt"]}                                a column
    {"lit": "2024-01-01", "type": "string"}        a literal (its text; null: JSON null) with Spark's type name
    {"unsupported": "..."}                         anything else: refused, named
SQL semantics: a predicate that is null for a row does not hold for it.
"""
from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from typing import Any, Iterable, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filestore import Partition, partition_value
from tablestore.errors import TableStoreError
from tablestore.spark import handover


class PredicateError(TableStoreError):
    """A predicate the managed table cannot evaluate (an unknown function, a column it does not have)."""


_COMPARE = {"=": "equal", "<>": "not_equal", "!=": "not_equal", "<": "less", "<=": "less_equal", ">": "greater",
            ">=": "greater_equal"}
_STRING = {"STARTS_WITH": "starts_with", "ENDS_WITH": "ends_with", "CONTAINS": "match_substring"}
_EPOCH = dt.date(1970, 1, 1)


def parse(text: str) -> list[Mapping[str, Any]]:
    try:
        nodes = json.loads(text)
    except ValueError as e:
        raise PredicateError(f"not a predicate list (JSON): {e}") from None
    if not isinstance(nodes, list):
        raise PredicateError(f"not a predicate list: {text[:200]!r}")
    handover.check("predicates", nodes)
    return nodes


def columns(node: Any) -> set[str]:
    """The columns a predicate (or a list of them) refers to."""
    if isinstance(node, list):
        return set().union(*(columns(n) for n in node)) if node else set()
    if "ref" in node:
        return {".".join(node["ref"])}
    return columns(list(node.get("args") or []))


def literal(node: Mapping[str, Any]) -> pa.Scalar:
    value, spark_type = node.get("lit"), str(node.get("type", "string"))
    if value is None:
        return pa.scalar(None)
    if spark_type in ("string", "char", "varchar") or spark_type.startswith(("char(", "varchar(")):
        return pa.scalar(str(value))
    if spark_type in ("tinyint", "smallint", "int", "bigint"):
        return pa.scalar(int(value), pa.int64())
    if spark_type == "boolean":
        return pa.scalar(str(value).lower() == "true")
    if spark_type in ("float", "double"):
        return pa.scalar(float(value))
    if spark_type == "date":   # Spark's internal value: days since the epoch
        return pa.scalar(_EPOCH + dt.timedelta(days=int(value)))
    if spark_type == "timestamp":   # microseconds since the epoch, UTC
        return pa.scalar(int(value), pa.timestamp("us", tz="UTC"))
    if spark_type == "timestamp_ntz":
        return pa.scalar(int(value), pa.timestamp("us"))
    match = re.fullmatch(r"decimal\((\d+),\s*(\d+)\)", spark_type)
    if match:
        return pa.scalar(Decimal(str(value)), pa.decimal128(int(match[1]), int(match[2])))
    raise PredicateError(f"literal {value!r} of Spark type {spark_type} is not supported in a predicate")


def expression(node: Mapping[str, Any], schema: pa.Schema) -> pc.Expression:
    """One JSON node as an Arrow expression over rows of `schema`."""
    if "ref" in node:
        name = ".".join(node["ref"])
        if name not in schema.names:
            raise PredicateError(f"column {name!r} is not one of {schema.names}")
        return pc.field(name)
    if "lit" in node:
        return pc.scalar(literal(node))
    if "op" not in node:
        raise PredicateError(f"predicate {node.get('unsupported', node)!r} is not supported")
    op = str(node["op"]).upper()
    args = list(node.get("args") or [])
    sub = [expression(a, schema) for a in args] if op != "IN" else []
    if op in _COMPARE:
        return getattr(pc, _COMPARE[op])(sub[0], sub[1])
    if op == "<=>":
        both_null = pc.and_kleene(pc.is_null(sub[0]), pc.is_null(sub[1]))
        return pc.or_kleene(both_null, pc.coalesce(pc.equal(sub[0], sub[1]), pc.scalar(False)))
    if op == "IS_NULL":
        return pc.is_null(sub[0])
    if op == "IS_NOT_NULL":
        return pc.is_valid(sub[0])
    if op == "AND":
        return pc.and_kleene(sub[0], sub[1])
    if op == "OR":
        return pc.or_kleene(sub[0], sub[1])
    if op == "NOT":
        return pc.invert(sub[0])
    if op == "ALWAYS_TRUE":
        return pc.scalar(True)
    if op == "ALWAYS_FALSE":
        return pc.scalar(False)
    if op == "IN":
        values = [literal(a).as_py() for a in args[1:]]
        return pc.is_in(expression(args[0], schema), value_set=pa.array(values))
    if op in _STRING and len(args) == 2 and "lit" in args[1]:
        return getattr(pc, _STRING[op])(sub[0], pattern=str(args[1]["lit"]))
    raise PredicateError(f"predicate function {op} is not supported")


def conjunction(nodes: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pc.Expression:
    """The AND of `nodes` (no nodes: true)."""
    result: pc.Expression = pc.scalar(True)
    for node in nodes:
        result = pc.and_kleene(result, expression(node, schema))
    return result


def matching_partitions(table: str, predicate_json: str, schema: pa.Schema, partition_keys: Sequence[str],
                        partitions: Iterable[Partition]) -> frozenset[Partition]:
    """The partitions (rendered values, as the file store keeps them) for which the predicates hold; the
    predicates may name partition columns only."""
    nodes = parse(predicate_json)
    outside = sorted(columns(nodes) - set(partition_keys))
    if outside:
        raise PredicateError(
            f"table {table!r}: an overwrite by a condition on {outside}, which are not partition columns "
            f"{list(partition_keys)}, is not supported: overwrite whole partitions (INSERT OVERWRITE ... PARTITION)")
    candidates = sorted(set(partitions), key=lambda p: tuple("" if v is None else v for v in p))
    if not candidates:
        return frozenset()
    key_schema = pa.schema([pa.field(k, schema.field(k).type) for k in partition_keys])
    columns_ = [pa.array([partition_value(p[i], schema.field(k).type).as_py() for p in candidates],
                         schema.field(k).type) for i, k in enumerate(partition_keys)]
    values = pa.Table.from_arrays(columns_, schema=key_schema)
    values = values.append_column("__index", pa.array(range(len(candidates)), pa.int64()))
    hit = values.filter(conjunction(nodes, key_schema)).column("__index").to_pylist()
    return frozenset(candidates[i] for i in hit)
