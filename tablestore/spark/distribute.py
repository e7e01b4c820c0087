"""`distribute_by_bucket(df, "db.orders")`: each bucket in one task, in strict input order, before a `managed` write.

`df.write.format("managed")` clusters its rows by the table's bucket itself (one writer per bucket, as SQL INSERT:
tablestore/spark/java/tablestore/spark/jvm/catalog/BucketClustering.java). What that shuffle does not give on a
cluster is the input order of one key's rows that come through several input partitions: a task fetches its
blocks from several executors in no fixed order. This step, applied before the write, fixes that order:

1. `_ts_order` = `monotonically_increasing_id()`: the row's input position (input partition, then row);
2. `_ts_bucket` = the table's own bucket function (`filestore.bucket.bucket_of`), computed once per row in a
   `mapInArrow` step over the key columns cast to the table's types (what the writer hashes);
3. repartition by (partition columns, `_ts_bucket`), sort each task's rows by `_ts_order`, drop both columns.

Each bucket is then in one task, in input order; the write's own shuffle moves each bucket out of that one task,
so its rows stay in that order. It also gives one writer per bucket when the write cannot cluster (key columns of
other types than the table's). It costs a Python pass and a shuffle: `bench/spark_datasource_bench.py` measures it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pyarrow as pa

from filestore import bucket_of
from tablestore.spark.source_options import table_ref
from tablestore.spark.pyworker import freeze_imports

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
    keys = list(schema.bucket_key_columns)
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


freeze_imports()   # a PySpark worker's collections after each task skip what is loaded by now (pyworker)
