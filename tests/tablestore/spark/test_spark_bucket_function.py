"""The JVM twin of the bucket function (tablestore.spark.jvm.mirror.BucketFunction, a Spark V2 ScalarFunction)
gives `filestore.bucket_of` on random keys of every key type Spark can carry, through Spark itself: the keys go into a
DataFrame of the Spark types tablestore maps the table's Arrow types to, and a SQL query calls the function from a
function catalog (`BucketFunctionCatalog`), as a table catalog's write distribution would."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filestore.bucket import bucket_of
from filestore.coerce import normalize_keys
from tablestore.spark.bucket_function import bucket_function_name
from tablestore.spark.types import read_schema, spark_schema, to_spark_batch

# version_independent: the same Java source is compiled for every PySpark (test_spark_jar compiles each) and Spark's
# V2 ScalarFunction call path is stable API; the matrix's other tests run the function inside writes
pytestmark = [pytest.mark.spark, pytest.mark.version_independent]

CATALOG = "ts_bucket"
EPOCH = dt.date(1970, 1, 1)


def _stored(unit: str, scale: int) -> st.SearchStrategy[int]:
    """Stored timestamp integers that Spark's microseconds hold exactly."""
    return st.integers(-(2**50) // scale, 2**50 // scale).map(lambda v: v * (1000 if unit == "ns" else 1))


# Arrow key type -> values (Python objects `pa.array(values, type)` takes)
VALUES: dict[pa.DataType, st.SearchStrategy[Any]] = {
    pa.bool_(): st.booleans(),
    pa.int8(): st.integers(-(2**7), 2**7 - 1),
    pa.int16(): st.integers(-(2**15), 2**15 - 1),
    pa.int32(): st.integers(-(2**31), 2**31 - 1),
    pa.int64(): st.integers(-(2**63), 2**63 - 1),
    pa.uint8(): st.integers(0, 2**8 - 1),
    pa.uint16(): st.integers(0, 2**16 - 1),
    pa.uint32(): st.integers(0, 2**32 - 1),
    pa.uint64(): st.integers(0, 2**64 - 1),
    pa.float32(): st.floats(width=32) | st.sampled_from([-0.0, math.nan, math.inf]),
    pa.float64(): st.floats() | st.sampled_from([-0.0, math.nan, -math.inf]),
    pa.decimal128(10, 2): st.decimals(min_value=Decimal("-99999999.99"), max_value=Decimal("99999999.99"), places=2),
    pa.decimal128(38, 0): st.integers(-(10**38) + 1, 10**38 - 1).map(Decimal),
    pa.date32(): st.dates(),
    pa.date64(): st.dates(),
    pa.timestamp("us", tz="UTC"): _stored("us", 1),
    pa.timestamp("ms"): _stored("ms", 1000),
    pa.timestamp("s", tz="UTC"): _stored("s", 10**6),
    pa.timestamp("ns", tz="UTC"): _stored("ns", 1000),
    pa.string(): st.text(max_size=12) | st.sampled_from(["", "\x00", "a\x00", "é"]),
    pa.large_string(): st.text(max_size=12),
    pa.binary(): st.binary(max_size=12) | st.sampled_from([b"", b"\x00", b"\x00\xff"]),
}
TYPES = list(VALUES)


@pytest.fixture(scope="module")
def bucket_sql(spark: Any) -> Any:
    spark.conf.set(f"spark.sql.catalog.{CATALOG}", "tablestore.spark.jvm.BucketFunctionCatalog")
    return spark


def _arrow_column(values: list[Any], type_: pa.DataType) -> pa.Array:
    if pa.types.is_timestamp(type_):
        return pa.array(values, pa.int64()).cast(type_)
    return pa.array(values, type_)


def jvm_buckets(spark: Any, keys: pa.Table, num_buckets: int) -> list[int]:
    """The buckets the JVM function gives the rows of `keys` (a table of the key columns, in key order)."""
    schema = spark_schema(keys.schema)
    batch = to_spark_batch(keys, read_schema(schema))
    batch = batch.append_column("pos", pa.array(range(keys.num_rows), pa.int64()))
    spark.createDataFrame(batch).createOrReplaceTempView("bucket_keys")
    name = bucket_function_name(keys.schema.types, num_buckets)
    columns = ", ".join(f"`{n}`" for n in keys.column_names)
    rows = spark.sql(f"SELECT pos, {CATALOG}.`{name}`({columns}) AS b FROM bucket_keys ORDER BY pos").collect()
    return [r.b for r in rows]


def python_buckets(keys: pa.Table, num_buckets: int) -> list[int]:
    """What the file store's write gives: keys in normal form (-0.0 is 0.0), then `bucket_of`."""
    names = keys.column_names
    return bucket_of(normalize_keys(keys, names), names, num_buckets).tolist()


@st.composite
def key_tables(draw: st.DrawFn) -> pa.Table:
    types = draw(st.lists(st.sampled_from(TYPES), min_size=1, max_size=3))
    n = draw(st.integers(1, 25))
    nullable = draw(st.booleans())  # whole-row keys (tables without a primary key) may hold nulls
    columns = {}
    for i, type_ in enumerate(types):
        values = VALUES[type_] | st.none() if nullable else VALUES[type_]
        columns[f"k{i}"] = _arrow_column(draw(st.lists(values, min_size=n, max_size=n)), type_)
    # non-nullable columns too: a one-column key that is never null is called compiled (BucketFunction.OneColumn)
    schema = pa.schema([pa.field(name, a.type, nullable=nullable) for name, a in columns.items()])
    return pa.table(columns, schema=schema)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                                 HealthCheck.function_scoped_fixture])
@given(key_tables(), st.integers(1, 300))
def test_jvm_bucket_function_equals_bucket_of(bucket_sql: Any, keys: pa.Table, num_buckets: int) -> None:
    assert jvm_buckets(bucket_sql, keys, num_buckets) == python_buckets(keys, num_buckets)


def test_every_key_type_with_its_edge_values(bucket_sql: Any) -> None:
    """Each type once, with the values at its edges (extremes, zeros, NaN, empty and zero bytes, pre-epoch)."""
    edges: dict[pa.DataType, list[Any]] = {
        pa.bool_(): [True, False, None],
        pa.int8(): [-128, 127, 0], pa.int16(): [-(2**15), 2**15 - 1, -1], pa.int32(): [-(2**31), 2**31 - 1, 0],
        pa.int64(): [-(2**63), 2**63 - 1, 42],
        pa.uint8(): [0, 255, 128], pa.uint16(): [0, 2**16 - 1, 1], pa.uint32(): [0, 2**32 - 1, 2**31],
        pa.uint64(): [0, 2**64 - 1, 2**63],
        pa.float32(): [-0.0, math.nan, -math.inf], pa.float64(): [-0.0, math.nan, 5e-324],
        pa.decimal128(10, 2): [Decimal("-99999999.99"), Decimal("0.01"), Decimal("-0.01")],
        pa.decimal128(38, 0): [Decimal(10**38 - 1), Decimal(-(10**38) + 1), Decimal(0)],
        pa.date32(): [dt.date(1, 1, 1), dt.date(9999, 12, 31), EPOCH],
        pa.date64(): [dt.date(1, 1, 1), EPOCH, dt.date(2024, 2, 29)],
        pa.timestamp("us", tz="UTC"): [-1, 0, 2**52], pa.timestamp("ms"): [-1, 1, -(2**40)],
        pa.timestamp("s", tz="UTC"): [-1, 1, 2**30], pa.timestamp("ns", tz="UTC"): [-1000, 0, 2**50 * 1000],
        pa.string(): ["", "\x00", "a\x00b"], pa.large_string(): ["é", "", "z" * 40],
        pa.binary(): [b"", b"\x00", b"\xff" * 17],
    }
    for type_, values in edges.items():
        keys = pa.table({"k": _arrow_column(values, type_)})
        for num_buckets in (1, 4, 255):
            assert jvm_buckets(bucket_sql, keys, num_buckets) == python_buckets(keys, num_buckets), type_


def test_the_function_refuses_a_column_of_another_type(bucket_sql: Any) -> None:
    bucket_sql.createDataFrame([("x",)], "s string").createOrReplaceTempView("wrong_keys")
    with pytest.raises(Exception, match="expected bigint for the Arrow type int64"):
        bucket_sql.sql(f"SELECT {CATALOG}.`tablestore_bucket:4:int64`(s) FROM wrong_keys").collect()
