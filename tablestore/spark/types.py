"""Spark <-> Arrow types: the one owner of the mapping between a table's Arrow schema and Spark's.

A table column maps to the Spark type that holds every value of it; reading casts the merged Arrow batches to
exactly the Arrow schema PySpark expects for that Spark schema (`read_schema`, PySpark's own conversion with the
UTC time zone, which Spark compares field for field), and writing casts Spark's Arrow batches back to the table's
schema (the file store's `conform`). Unsigned integers widen to the next signed type (uint64 to decimal(20, 0)).
Arrow types without a Spark twin (durations, unions, ...) raise `SparkTypeError` naming the column.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from tablestore.errors import TableStoreError

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


class SparkTypeError(TableStoreError):
    """A column's type has no Spark equivalent."""


def spark_type(type_: pa.DataType, column: str = "?") -> "DataType":
    from pyspark.sql import types as T

    simple: list[tuple[object, "DataType"]] = [
        (pa.types.is_boolean, T.BooleanType()), (pa.types.is_int8, T.ByteType()), (pa.types.is_int16, T.ShortType()),
        (pa.types.is_int32, T.IntegerType()), (pa.types.is_int64, T.LongType()),
        (pa.types.is_uint8, T.ShortType()), (pa.types.is_uint16, T.IntegerType()),
        (pa.types.is_uint32, T.LongType()), (pa.types.is_uint64, T.DecimalType(20, 0)),
        (pa.types.is_float32, T.FloatType()), (pa.types.is_float64, T.DoubleType()),
        (pa.types.is_string, T.StringType()), (pa.types.is_large_string, T.StringType()),
        (pa.types.is_binary, T.BinaryType()), (pa.types.is_large_binary, T.BinaryType()),
        (pa.types.is_date32, T.DateType()), (pa.types.is_date64, T.DateType()), (pa.types.is_null, T.NullType()),
    ]
    for test, spark in simple:
        if test(type_):  # type: ignore[operator]
            return spark
    if pa.types.is_decimal(type_):
        if type_.precision > 38:
            raise SparkTypeError(f"column {column!r}: {type_} is wider than Spark's decimal(38)")
        return T.DecimalType(type_.precision, type_.scale)
    if pa.types.is_timestamp(type_):
        return T.TimestampType() if type_.tz is not None else T.TimestampNTZType()
    if pa.types.is_list(type_) or pa.types.is_large_list(type_):
        return T.ArrayType(spark_type(type_.value_type, column), type_.value_field.nullable)
    if pa.types.is_map(type_):
        return T.MapType(spark_type(type_.key_type, column), spark_type(type_.item_type, column),
                         type_.item_field.nullable)
    if pa.types.is_struct(type_):
        return T.StructType([T.StructField(f.name, spark_type(f.type, f"{column}.{f.name}"), f.nullable)
                             for f in type_])
    raise SparkTypeError(f"column {column!r}: Arrow type {type_} has no Spark equivalent")


def spark_schema(schema: pa.Schema) -> "StructType":
    """The Spark schema of a table's Arrow schema (names, types, nullability)."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, spark_type(f.type, f.name), f.nullable) for f in schema])


def read_schema(schema: "StructType") -> pa.Schema:
    """The Arrow schema a Python data source must return batches in for the Spark `schema`: what the installed
    PySpark's data-source worker compares them with. PySpark 4.2+ converts with `timezone="UTC"`; 4.1's
    `to_arrow_schema` has no such argument and makes timestamps UTC by default."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema

    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema)


def to_spark_batch(table: pa.Table, target: pa.Schema) -> pa.Table:
    """`table` (the table's Arrow types) cast to `target` (`read_schema`), nullability included."""
    columns = [table.column(f.name).cast(f.type) for f in target]
    return pa.Table.from_arrays(columns, schema=target)
