"""The `managed` Spark data source: `spark.read.format("managed").load("db.orders")`,
`df.write.format("managed").mode("append").save("db.orders")`,
`df.writeStream.format("managed").option("checkpointLocation", ck).start("db.orders")` (stream_write.py).

Spark finds it without a register call: the top-level module `pyspark_managed` (installed with tablestore)
exposes `DefaultSource`, which PySpark's static lookup registers under `name()` in every session whose Python
workers can import it. That module stays light (every session imports it) and builds this one's classes.
With the tablestore Spark jar on the classpath (`tablestore.spark.session()` puts it there), `format("managed")`
resolves to the JVM class `managed.DefaultSource` first (tablestore/spark/java/tablestore/spark/jvm/provider/
ManagedProvider.java), which delegates everything to this Python source and tells it when Spark asks for the
schema of a streaming read (`CHANGES_OPTION`): `spark.readStream.format("managed").load("db.t")` then gets
`_row_kind` + the table's columns without a schema.

Options (Spark lowercases their keys):
- the path (`load("db.t")` / `save("db.t")`) or `table`: the table identifier;
- `warehouse`: where the catalog lives; default: the `TABLESTORE_WAREHOUSE` environment variable, which
  `tablestore.spark.session(warehouse=...)` sets;
- `table-storage.*`: catalog session options (see docs/options.md);
- reads: `snapshot-id` or `timestamp-ms` (time travel);
- writes: `overwrite-mode` = `static` (default: overwrite replaces the whole table), `dynamic` (only the
  partitions the written rows are in) or `filter` (the partitions `overwrite-predicate` selects: Spark's predicate
  as JSON, which the SQL catalog passes, tablestore/spark/predicates.py); `change-tracking` (default: the table's
  option).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from tablestore.spark.source_options import (CHANGES_OPTION, NAME, WAREHOUSE_ENV, DataSourceOptionError, TableRef,
                                             int_option, table_ref)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["CHANGES_OPTION", "NAME", "WAREHOUSE_ENV", "DataSourceOptionError", "TableRef", "int_option",
           "read_changes", "reader", "schema_of", "stream_reader", "stream_writer", "table_ref", "writer"]


def schema_of(options: Mapping[str, str]) -> "StructType":
    """The table's schema; the changelog schema of its changes when the JVM provider says the read is a stream."""
    from tablestore.spark.types import spark_schema

    from tablestore.spark import log_publish

    if log_publish.READ_OPTION in dict(options):   # the JVM's job producing a commit's log (spark/log_publish.py)
        return log_publish.publish_schema()
    ref = table_ref(options)
    if str(dict(options).get(CHANGES_OPTION, "")).lower() == "true":
        from tablestore.spark.stream_read import changes_schema

        return spark_schema(changes_schema(ref))
    return spark_schema(ref.handle().schema.arrow_schema)


def reader(options: Mapping[str, str], schema: "StructType") -> Any:
    from tablestore.spark import log_publish
    from tablestore.spark.read import ManagedReader

    if log_publish.READ_OPTION in dict(options):
        return log_publish.LogPublishReader(options)

    return ManagedReader(dict(options), schema)


def writer(options: Mapping[str, str], schema: "StructType", overwrite: bool) -> Any:
    from tablestore.spark.write import ManagedWriter

    return ManagedWriter(dict(options), schema, overwrite)


def stream_writer(options: Mapping[str, str], schema: "StructType", overwrite: bool) -> Any:
    from tablestore.spark.stream_write import ManagedStreamWriter

    return ManagedStreamWriter(dict(options), schema, overwrite)


def stream_reader(options: Mapping[str, str], schema: "StructType") -> Any:
    from tablestore.spark.stream_read import ManagedStreamReader

    return ManagedStreamReader(dict(options), schema)


def read_changes(spark: Any, table: str, **options: Any) -> Any:
    """`spark.readStream.format("managed")` of `table`'s changes: `_row_kind` + the table's columns (see
    tablestore/spark/stream_read.py; options `scan`, `scan.timestamp-ms`, `max-rows-per-trigger`, `warehouse`)."""
    from tablestore.spark.stream_read import read_changes as read

    return read(spark, table, **options)
