"""Spark <-> Arrow types: the one place tablestore converts between them."""
from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType


def to_arrow_type(spark_type: "DataType") -> pa.DataType:
    from pyspark.sql import types as T

    simple = {
        T.BooleanType: pa.bool_(), T.ByteType: pa.int8(), T.ShortType: pa.int16(), T.IntegerType: pa.int32(),
        T.LongType: pa.int64(), T.FloatType: pa.float32(), T.DoubleType: pa.float64(), T.StringType: pa.string(),
        T.BinaryType: pa.binary(), T.DateType: pa.date32(), T.TimestampType: pa.timestamp("us", tz="UTC"),
        T.TimestampNTZType: pa.timestamp("us"),
    }
    for cls, arrow in simple.items():
        if isinstance(spark_type, cls):
            return arrow
    if isinstance(spark_type, T.DecimalType):
        return pa.decimal128(spark_type.precision, spark_type.scale)
    if isinstance(spark_type, T.ArrayType):
        return pa.list_(to_arrow_type(spark_type.elementType))
    if isinstance(spark_type, T.StructType):
        return pa.struct([pa.field(f.name, to_arrow_type(f.dataType), f.nullable) for f in spark_type.fields])
    if isinstance(spark_type, T.MapType):
        return pa.map_(to_arrow_type(spark_type.keyType), to_arrow_type(spark_type.valueType))
    raise TypeError(f"no Arrow type for Spark type {spark_type.simpleString()}")


def to_arrow_schema(schema: "StructType") -> pa.Schema:
    return pa.schema([pa.field(f.name, to_arrow_type(f.dataType), f.nullable) for f in schema.fields])


def to_spark_type(arrow_type: pa.DataType) -> "DataType":
    from pyspark.sql import types as T

    t = arrow_type
    checks = [
        (pa.types.is_boolean, T.BooleanType()), (pa.types.is_int8, T.ByteType()), (pa.types.is_int16, T.ShortType()),
        (pa.types.is_int32, T.IntegerType()), (pa.types.is_int64, T.LongType()), (pa.types.is_uint8, T.ShortType()),
        (pa.types.is_uint16, T.IntegerType()), (pa.types.is_uint32, T.LongType()),
        (pa.types.is_float32, T.FloatType()), (pa.types.is_float64, T.DoubleType()),
        (pa.types.is_string, T.StringType()), (pa.types.is_large_string, T.StringType()),
        (pa.types.is_binary, T.BinaryType()), (pa.types.is_large_binary, T.BinaryType()),
        (pa.types.is_date, T.DateType()),
    ]
    for check, spark in checks:
        if check(t):
            return spark
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz else T.TimestampNTZType()
    if pa.types.is_decimal(t):
        return T.DecimalType(t.precision, t.scale)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(to_spark_type(t.value_type))
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, to_spark_type(f.type), f.nullable) for f in t])
    if pa.types.is_map(t):
        return T.MapType(to_spark_type(t.key_type), to_spark_type(t.item_type))
    raise TypeError(f"no Spark type for Arrow type {t}")


def to_spark_schema(schema: pa.Schema) -> "StructType":
    from pyspark.sql import types as T

    return T.StructType([T.StructField(f.name, to_spark_type(f.type), f.nullable) for f in schema])
