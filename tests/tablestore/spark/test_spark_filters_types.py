"""Spark filters -> Arrow expressions, and the Spark <-> Arrow type mapping (no SparkSession needed)."""
from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pytest
from pyspark.sql import datasource as D
from pyspark.sql.pandas.types import to_arrow_schema

from tablestore.spark.filters import from_predicate, translate, translate_predicates
from tablestore.spark.types import SparkTypeError, read_schema, spark_schema, to_spark_batch

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("v", pa.float64()),
                    ("ts", pa.timestamp("us", tz="UTC")), ("d", pa.date32())])
ROWS = pa.table({"id": [1, 2, 3, 4], "name": ["a", None, "ab", "b"], "v": [1.0, float("nan"), None, 2.0],
                 "ts": pa.array([0, 1, 2, 3], pa.timestamp("us", tz="UTC")),
                 "d": [dt.date(2024, 1, i) for i in range(1, 5)]}, schema=SCHEMA)


def _ids(expression: object) -> list[int]:
    return ROWS.filter(expression).column("id").to_pylist()


def test_exact_filters_follow_sql_null_semantics_and_leave_the_plan() -> None:
    filters = [D.GreaterThan(("id",), 1), D.Not(D.EqualTo(("name",), "b")), D.IsNotNull(("name",)),
               D.StringStartsWith(("name",), "a")]
    done = translate(filters, SCHEMA)
    assert done.kept == ()
    assert _ids(done.exact) == [3]            # NOT(name = 'b') drops the null name, as in Spark


def test_floats_timestamps_and_untranslatable_filters_stay_with_spark() -> None:
    filters = [D.GreaterThan(("v",), 0.5), D.LessThan(("ts",), dt.datetime(2030, 1, 1)),
               D.Not(D.In(("id",), [1])),  # type: ignore[arg-type]  # Spark passes a list
               D.EqualTo(("id",), "not a number"), D.EqualTo(("nested", "x"), 1)]
    done = translate(filters, SCHEMA)
    assert done.kept == (0, 1, 2, 3, 4)
    assert done.exact is None
    assert _ids(done.prune) == [1, 4]         # the float comparison still prunes (NaN > 0.5 is for Spark)


def test_in_equal_null_safe_and_dates() -> None:
    done = translate([D.In(("id",), [2, 4, 9]), D.EqualNullSafe(("name",), None)], SCHEMA)  # type: ignore[arg-type]
    assert _ids(done.exact) == [2]
    done = translate([D.GreaterThanOrEqual(("d",), dt.date(2024, 1, 3)), D.Not(D.EqualNullSafe(("name",), "b"))],
                     SCHEMA)
    assert _ids(done.exact) == [3]


def test_read_schema_is_what_pyspark_expects_and_batches_cast_to_it() -> None:
    schema = pa.schema([pa.field("k", pa.int32(), False), ("s", pa.large_string()), ("u", pa.uint32()),
                        ("dec", pa.decimal128(10, 2)), ("ntz", pa.timestamp("ms")),
                        ("tz", pa.timestamp("ns", tz="Europe/Paris")), ("l", pa.list_(pa.int16())),
                        ("st", pa.struct([("a", pa.bool_())])), ("b", pa.binary()), ("f", pa.float32())])
    spark = spark_schema(schema)
    assert [f.nullable for f in spark] == [f.nullable for f in schema]
    target = read_schema(spark)
    without_tz = spark_schema(schema.remove(schema.get_field_index("tz")))
    plain = to_arrow_schema(without_tz)   # 4.1: timestamps in UTC by default; 4.2+: only with timezone="UTC"
    assert all(target.field(f.name).equals(plain.field(f.name)) for f in plain)
    assert target.field("tz").type == pa.timestamp("us", tz="UTC")
    row = {"k": 1, "s": "x", "u": 7, "dec": decimal.Decimal("1.25"), "ntz": dt.datetime(2024, 1, 1),
           "tz": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), "l": [1], "st": {"a": True}, "b": b"x", "f": 1.5}
    cast = to_spark_batch(pa.Table.from_pylist([row], schema=schema), target)
    assert cast.schema.equals(target) and cast.to_pylist()[0]["u"] == 7


def test_types_without_a_spark_twin_name_the_column() -> None:
    with pytest.raises(SparkTypeError, match="'span'"):
        spark_schema(pa.schema([("span", pa.duration("s"))]))


def test_decimals_and_booleans_are_exact() -> None:
    schema = pa.schema([("amount", pa.decimal128(9, 2)), ("flag", pa.bool_())])
    rows = pa.table({"amount": [decimal.Decimal("1.00"), decimal.Decimal("2.50"), None],
                     "flag": [True, True, None]}, schema=schema)
    done = translate([D.GreaterThan(("amount",), decimal.Decimal("1.5")), D.EqualTo(("flag",), True)], schema)
    assert done.kept == () and rows.filter(done.exact).num_rows == 1
    assert translate([D.EqualTo(("amount",), decimal.Decimal("1.001"))], schema).kept == (0,)   # does not fit


def _node(op: str, column: str, *literals: tuple[str | None, str]) -> dict[str, object]:
    return {"op": op, "args": [{"ref": [column]}, *({"lit": v, "type": t} for v, t in literals)]}


def test_filters_handed_over_by_the_jvm_are_the_filters_a_python_source_gets() -> None:
    """A JVM scan's filters reach the catalog service in their V2 form (the `predicates` hand-over format): each one
    becomes the `pyspark.sql.datasource` filter PySpark would give a Python data source, so one `translate` rules."""
    nodes = [_node(">", "id", ("1", "bigint")), {"op": "NOT", "args": [_node("=", "name", ("b", "string"))]},
             _node("IS_NOT_NULL", "name"), _node("STARTS_WITH", "name", ("a", "string")),
             _node("IN", "id", ("2", "int"), ("4", "int")), _node(">=", "d", ("19725", "date")),
             _node("<=>", "name", (None, "string")), _node("<", "v", ("0.5", "double")),
             _node("=", "id", ("AAE=", "binary")), {"op": "OR", "args": [_node("=", "id", ("1", "bigint"))] * 2},
             {"unsupported": "a filter with no V2 form"}]
    assert [from_predicate(n) for n in nodes] == [
        D.GreaterThan(("id",), 1), D.Not(D.EqualTo(("name",), "b")), D.IsNotNull(("name",)),
        D.StringStartsWith(("name",), "a"), D.In(("id",), (2, 4)), D.GreaterThanOrEqual(("d",), dt.date(2024, 1, 3)),
        D.EqualNullSafe(("name",), None), D.LessThan(("v",), 0.5), None, None, None]
    done = translate_predicates(nodes, SCHEMA)
    assert done.kept == (7, 8, 9, 10)   # the float comparison prunes but stays with Spark; the others have no form
    assert _ids(done.exact) == []       # id > 1 AND name <> 'b' AND ... AND name IS NULL: no row
    assert _ids(translate_predicates(nodes[:6], SCHEMA).exact) == []
    assert _ids(translate_predicates([nodes[0], nodes[1], nodes[5]], SCHEMA).exact) == [3]
