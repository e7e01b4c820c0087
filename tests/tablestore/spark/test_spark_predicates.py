"""tablestore.spark.predicates: Spark's V2 predicates (as the JVM's PredicateJson writes them) over partitions."""
from __future__ import annotations

import datetime as dt
import json
from typing import Any, Sequence

import pyarrow as pa
import pytest

from tablestore.spark.predicates import PredicateError, columns, matching_partitions

pytestmark = pytest.mark.version_independent   # Python over the JVM's JSON: no PySpark API

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string()), pa.field("day", pa.date32()),
                    pa.field("n", pa.int32())])
DT = {"ref": ["dt"]}


def lit(value: Any, type_: str = "string") -> dict[str, Any]:
    return {"lit": value, "type": type_}


def op(name: str, *args: Any) -> dict[str, Any]:
    return {"op": name, "args": list(args)}


def match(predicates: list[Any], partitions: Sequence[tuple[str, ...]], keys: tuple[str, ...] = ("dt",)) -> set[Any]:
    return set(matching_partitions("db.t", json.dumps(predicates), SCHEMA, keys, partitions))


def test_insert_overwrite_partition_predicate_of_spark() -> None:
    # what Spark hands the overwrite of INSERT OVERWRITE t PARTITION (dt = 'a'): dt <=> 'a', spelled out
    x = lit("a")
    spelled = op("OR", op("AND", op("AND", op("IS_NOT_NULL", DT), op("IS_NOT_NULL", x)), op("=", DT, x)),
                 op("AND", op("IS_NULL", DT), op("IS_NULL", x)))
    parts = [("a",), ("b",), ("__DEFAULT_PARTITION__",)]
    assert match([spelled], parts) == {("a",)}
    assert match([op("<=>", DT, x)], parts) == {("a",)}
    assert match([op("<=>", DT, lit(None))], parts) == {("__DEFAULT_PARTITION__",)}   # the null partition


def test_comparisons_in_not_and_typed_literals() -> None:
    parts = [("a", "2024-01-01", "1"), ("b", "2024-01-02", "7"), ("c", "2024-01-03", "12")]
    keys = ("dt", "day", "n")
    assert match([op(">", {"ref": ["n"]}, lit("5", "int"))], parts, keys) == {parts[1], parts[2]}
    days = (dt.date(2024, 1, 2) - dt.date(1970, 1, 1)).days
    assert match([op("=", {"ref": ["day"]}, lit(str(days), "date"))], parts, keys) == {parts[1]}
    assert match([op("IN", DT, lit("a"), lit("c"))], parts, keys) == {parts[0], parts[2]}
    assert match([op("NOT", op("=", DT, lit("a"))), op("<", {"ref": ["n"]}, lit("10", "int"))], parts, keys) == \
        {parts[1]}
    assert match([op("STARTS_WITH", DT, lit("b"))], parts, keys) == {parts[1]}
    assert match([op("ALWAYS_FALSE")], parts, keys) == set()


def test_refuses_non_partition_columns_and_unknown_functions() -> None:
    with pytest.raises(PredicateError, match=r"condition on \['id'\], which are not partition columns"):
        match([op(">", {"ref": ["id"]}, lit("3", "bigint"))], [("a",)])
    with pytest.raises(PredicateError, match="predicate function UPPER is not supported"):
        match([op("=", op("UPPER", DT), lit("A"))], [("a",)])
    with pytest.raises(PredicateError, match="is not supported"):
        match([{"unsupported": "weird(dt)"}], [("a",)])
    assert columns([op("AND", op("=", DT, lit("a")), op("IS_NULL", {"ref": ["n"]}))]) == {"dt", "n"}
