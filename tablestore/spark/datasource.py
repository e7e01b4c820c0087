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

Options (Spark lowercases their keys): `source_options.OPTIONS` declares every one a read, write or stream accepts
(the table as the path or `table`, `warehouse`, `table-storage.*`, the catalog's `s3.*`, time travel, the stream
and overwrite options, Spark's `checkpointLocation`); any other is refused by `check_options` (docs/spark.md).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from tablestore.spark.source_options import (CHANGES_OPTION, EVERY, NAME, OPTIONS, WAREHOUSE_ENV, DataSourceOptionError,
                                             SourceOption, TableRef, check_options, int_option, table_ref)

if TYPE_CHECKING:
    from pyspark.sql.types import StructType

__all__ = ["CHANGES_OPTION", "NAME", "OPTIONS", "WAREHOUSE_ENV", "DataSourceOptionError", "SourceOption", "TableRef",
           "check_options", "int_option",
           "read_changes", "reader", "schema_of", "stream_reader", "stream_writer", "table_ref", "writer"]


def schema_of(options: Mapping[str, str]) -> "StructType":
    """The table's schema; the changelog schema of its changes when the JVM provider says the read is a stream."""
    from tablestore.spark.types import spark_schema

    from tablestore.spark import compact_job, log_publish

    if log_publish.READ_OPTION in dict(options):   # the JVM's job producing a commit's log (spark/log_publish.py)
        return log_publish.publish_schema()
    if compact_job.READ_OPTION in dict(options):   # the JVM's compaction job (spark/compact_job.py)
        return compact_job.task_schema()
    stream = str(dict(options).get(CHANGES_OPTION, "")).lower() == "true"
    # Spark asks the schema of batch reads, writes and (without the jar's provider) streams alike: reader(),
    # writer(), stream_reader() and stream_writer() check for their own use
    check_options(options, *(("stream-read",) if stream else EVERY))
    ref = table_ref(options)
    if stream:
        from tablestore.spark.stream_read import changes_schema

        return spark_schema(changes_schema(ref))
    return spark_schema(ref.handle().schema.arrow_schema)


def reader(options: Mapping[str, str], schema: "StructType") -> Any:
    from tablestore.spark import compact_job, log_publish
    from tablestore.spark.read import ManagedReader

    if log_publish.READ_OPTION in dict(options):
        return log_publish.LogPublishReader(options)
    if compact_job.READ_OPTION in dict(options):
        return compact_job.CompactReader(options)

    check_options(options, "read")
    return ManagedReader(dict(options), schema)


def writer(options: Mapping[str, str], schema: "StructType", overwrite: bool) -> Any:
    from tablestore.spark.write import ManagedWriter

    check_options(options, "write")
    return ManagedWriter(dict(options), schema, overwrite)


def stream_writer(options: Mapping[str, str], schema: "StructType", overwrite: bool) -> Any:
    from tablestore.spark.stream_write import ManagedStreamWriter

    check_options(options, "stream-write")
    return ManagedStreamWriter(dict(options), schema, overwrite)


def stream_reader(options: Mapping[str, str], schema: "StructType") -> Any:
    from tablestore.spark.stream_read import ManagedStreamReader

    check_options(options, "stream-read")
    return ManagedStreamReader(dict(options), schema)


def read_changes(spark: Any, table: str, **options: Any) -> Any:
    """`spark.readStream.format("managed")` of `table`'s changes: `_row_kind` + the table's columns (see
    tablestore/spark/stream_read.py; options `scan`, `scan.timestamp-ms`, `max-rows-per-trigger`, `warehouse`)."""
    from tablestore.spark.stream_read import read_changes as read

    return read(spark, table, **options)
