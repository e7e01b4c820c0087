"""`distribute_by_bucket(df, "db.orders")`: one writer per bucket (FLIP-188) for a `managed` write.

Spark's Python data source API cannot ask Spark for a write distribution, so `df.write.format("managed")` writes
each bucket from every task whose rows hash to it (sequence numbers never tie: see tablestore/spark/write.py).
This step, applied before the write, sends each (partition, bucket) to exactly one task, in input order:

1. `_ts_order` = `monotonically_increasing_id()`: the row's input position (input partition, then row);
2. `_ts_bucket` = the table's own bucket function (`filestore.bucket.bucket_of`), computed once per row in a
   `mapInArrow` step over the key columns cast to the table's types (what the writer hashes);
3. repartition by (partition columns, `_ts_bucket`), sort each task's rows by `_ts_order`, drop both columns.

So a bucket is written by one task, a key's rows apply in input order, and a write produces one sorted run per
bucket instead of one per task and bucket. It costs a Python pass and a shuffle: `bench/spark_datasource_bench.py`
measures it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from filestore import bucket_of
from tablestore.spark.datasource import table_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

ORDER = "_ts_order"
BUCKET = "_ts_bucket"


def distribute_by_bucket(df: "DataFrame", table: str, *, warehouse: str | None = None) -> "DataFrame":
    """`df` redistributed so that each bucket of `table` is in one task, rows in input order (see the module)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import IntegerType, LongType, StructField, StructType

    options = {"path": table} | ({"warehouse": warehouse} if warehouse else {})
    handle = table_ref(options).handle()
    schema = handle.schema
    keys = list(schema.key_columns)
    types = {f.name: f.type for f in schema.arrow_schema}
    buckets = handle.store.options.bucket
    key_schema = pa.schema([pa.field(k, types[k]) for k in keys])

    def add_bucket(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            key_table = pa.Table.from_arrays([batch.column(k).cast(types[k]) for k in keys], schema=key_schema)
            column = pa.array(bucket_of(key_table, keys, buckets), pa.int32())
            yield pa.RecordBatch.from_arrays([*batch.columns, column], names=[*batch.schema.names, BUCKET])

    out_schema = StructType([*df.schema.fields, StructField(ORDER, LongType(), False),
                             StructField(BUCKET, IntegerType(), False)])
    with_order = df.withColumn(ORDER, F.monotonically_increasing_id())
    bucketed = with_order.mapInArrow(add_bucket, out_schema)
    return (bucketed.repartition(*schema.partition_keys, BUCKET).sortWithinPartitions(ORDER)
            .drop(ORDER, BUCKET))
