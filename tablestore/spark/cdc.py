"""A database's change stream in Kafka as a streaming DataFrame of a managed table's changes:

    changes = tablestore.spark.read_cdc(spark, topic="shop.public.orders", bootstrap_servers="127.0.0.1:19092",
                                        format="debezium-json", table="shop.orders")
    changes.writeStream.format("managed").option("checkpointLocation", ck).start("shop.orders")

Spark's own Kafka source reads the topic (`session(kafka=True)` puts it on the classpath: tablestore/spark/kafka.py);
tablestore/spark/cdc_decode.py decodes it in the JVM. The DataFrame's schema is the table's when `read_cdc` is
called; a record with columns the table does not have (or a wider type) stops the stream with an error saying so:
`tablestore ingest` (tablestore/spark/ingest.py) is the job that evolves the table and carries on.
`create=True` creates a missing table (and its database) from the first record's schema (tablestore/cdc).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence, cast

import logstore
from catalog import INGEST_TRUNCATE
from tablestore.cdc import FORMATS, CdcSchemaError, KnownSchema, evolution, known_schema, record_schema
from tablestore.errors import TableStoreError
from tablestore.spark.cdc_decode import BadRecords, DecodeSpec, changes
from tablestore.spark.cdc_formats import TruncateBarrier, TruncatePolicy
from tablestore.spark.source_options import DataSourceOptionError, TableRef, table_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from catalog import CatalogTable

StartingOffsets = Literal["earliest", "latest"]
BAD_RECORDS = ("fail", "skip")


class CdcSourceError(TableStoreError):
    """A CDC source cannot be read: an unknown format, a missing table, a topic with nothing to create it from."""


def kafka_stream(spark: "SparkSession", *, topic: str | None = None, bootstrap_servers: str,
                 starting_offsets: str = "earliest", kafka_options: Mapping[str, str] | None = None,
                 max_offsets_per_trigger: int | None = None, topic_pattern: str | None = None) -> "DataFrame":
    """Spark's Kafka source of `topic`, or of every topic matching `topic_pattern` (key, value, topic, partition,
    offset, timestamp, ...). `kafka_options`: more source options (`kafka.security.protocol`, `failOnDataLoss`,
    ...), which win."""
    from tablestore.spark.kafka import check_kafka_source

    check_kafka_source(spark)
    subscribe = ("subscribe", topic) if topic_pattern is None else ("subscribePattern", topic_pattern)
    reader = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap_servers)
              .option(*subscribe).option("startingOffsets", starting_offsets)
              .option("failOnDataLoss", "true"))
    if max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    for key, value in (kafka_options or {}).items():
        reader = reader.option(key, value)
    return reader.load()


def check_format(format: str) -> str:
    if format not in FORMATS:
        raise CdcSourceError(f"unknown CDC format {format!r}: use one of {', '.join(FORMATS)}")
    return format


def resolve_table(ref: TableRef, *, topic: str, bootstrap_servers: str, format: str, create: bool,
                  starting_offsets: str = "earliest", table_options: Mapping[str, str] | None = None,
                  wait_s: float = 30.0) -> "CatalogTable":
    """The table `ref` names; with `create`, a missing one is created (with its database) from the first record of
    `topic` (waiting up to `wait_s` for one), its primary key from the record key. Without `create` a missing table
    is a CdcSourceError naming it."""
    import catalog

    cat = catalog.Catalog(ref.warehouse, dict(ref.catalog_options))
    if cat.table_exists(ref.identifier):
        return cat.get_table(ref.identifier)
    if not create:
        raise CdcSourceError(f"table {ref.identifier!r} does not exist in {ref.warehouse}: create it, or pass "
                             f"--create (create=True) to create it from the first record of topic {topic!r}")
    properties = {"bootstrap.servers": bootstrap_servers}
    record = logstore.first_record(properties, topic, latest=starting_offsets == "latest", timeout_s=wait_s)
    if record is None:
        raise CdcSourceError(f"table {ref.identifier!r}: topic {topic!r} had no record within {wait_s:.0f} s to "
                             f"create the table from")
    return create_from_record(ref, record, format, table_options)


def create_from_record(ref: TableRef, record: logstore.KafkaRecord, format: str,
                       table_options: Mapping[str, str] | None = None) -> "CatalogTable":
    """The table `ref` names, created (with its database, unless it exists by now) from the schema `record` carries
    and the primary key of its Kafka key (tablestore.cdc.record_schema)."""
    import catalog

    where = f"topic {record.topic!r} partition {record.partition} offset {record.offset}"
    try:
        found = record_schema(format, record.key, record.value)
    except CdcSchemaError as e:
        raise CdcSourceError(f"table {ref.identifier!r}: cannot create it from the {format} record at {where}: "
                             f"{e}") from None
    if not found.primary_key:
        raise CdcSourceError(f"table {ref.identifier!r}: the {format} record at {where} names no primary key (its "
                             f"Kafka key has no fields): create the table yourself with the primary key")
    cat = catalog.Catalog(ref.warehouse, dict(ref.catalog_options))
    cat.create_database(ref.identifier.split(".")[0], ignore_if_exists=True)
    return cat.create_table(ref.identifier, found.arrow_schema(), primary_key=list(found.primary_key),
                            options=dict(table_options or {}), ignore_if_exists=True)


def known_schemas(handle: "CatalogTable", format: str, records: Sequence[logstore.KafkaRecord]) -> tuple[
        KnownSchema, ...]:
    """The Debezium schemas among `records` that `handle`'s table takes as they are: the decoder's fast paths for
    records of the same schema (tablestore/spark/cdc_formats.py). Other records are checked one by one."""
    if format != "debezium-json":
        return ()
    found: list[KnownSchema] = []
    for r in records:
        known = known_schema(r.value)
        if known is None or known in found:
            continue
        try:
            change = evolution(handle.identifier, handle.schema.arrow_schema, record_schema(format, r.key, r.value),
                               tuple(handle.schema.primary_keys))
        except CdcSchemaError:
            continue
        if not change:
            found.append(known)
    return tuple(found)


def decode_spec(handle: "CatalogTable", format: str, bad_records: str, *, known: tuple[KnownSchema, ...] = (),
                before_images: bool = True, barrier: TruncateBarrier | None = None) -> DecodeSpec:
    """How to decode `format` records into `handle`'s table; `barrier`: the last TRUNCATE an ingest job applied
    (tablestore/spark/ingest_truncate.py)."""
    if bad_records not in BAD_RECORDS:
        raise CdcSourceError(f"bad_records must be one of {BAD_RECORDS}, not {bad_records!r}")
    mode: BadRecords = "skip" if bad_records == "skip" else "fail"
    truncate = cast(TruncatePolicy, handle.options.get(INGEST_TRUNCATE))
    return DecodeSpec(check_format(format), handle.identifier, handle.schema.arrow_schema,
                      tuple(handle.schema.primary_keys), mode, known, before_images, truncate, barrier)


def read_cdc(spark: "SparkSession", topic: str, bootstrap_servers: str, format: str = "debezium-json",
             table: str | None = None, *, warehouse: str | None = None, starting_offsets: str = "earliest",
             bad_records: str = "fail", create: bool = False, kafka_options: Mapping[str, str] | None = None,
             max_offsets_per_trigger: int | None = None, table_options: Mapping[str, str] | None = None) -> "DataFrame":
    """A streaming DataFrame of the changes `topic` carries in `format` (`debezium-json`, `upsert-json`,
    `canal-json`, `maxwell-json`), as `table`'s changelog: `_row_kind` (+I/-U/+U/-D) + its columns, ready for
    `writeStream.format("managed")`. `bad_records`: `fail` (default) stops at the first record that is not valid
    for its format, naming topic, partition, offset and reason; `skip` drops and counts them (the observed metric
    `tablestore_cdc.bad` of the query's progress). `create`: create a missing table from the first record."""
    if table is None:
        raise DataSourceOptionError("read_cdc needs the table whose changes the topic carries (table='db.t')")
    check_format(format)
    ref = table_ref({"path": table} | ({"warehouse": warehouse} if warehouse else {}))
    handle = resolve_table(ref, topic=topic, bootstrap_servers=bootstrap_servers, format=format, create=create,
                           starting_offsets=starting_offsets, table_options=table_options)
    raw = kafka_stream(spark, topic=topic, bootstrap_servers=bootstrap_servers, starting_offsets=starting_offsets,
                       kafka_options=kafka_options, max_offsets_per_trigger=max_offsets_per_trigger)
    sample = logstore.edge_records({"bootstrap.servers": bootstrap_servers}, topic)
    return changes(raw, decode_spec(handle, format, bad_records, known=known_schemas(handle, format, sample)))


def observed(progress: Mapping[str, Any] | None) -> dict[str, int]:
    """The decoder's observed metrics of one micro-batch's progress (`query.lastProgress`): rows, bad, max_ts_ms."""
    from tablestore.spark.cdc_decode import OBSERVATION

    metrics: Any = ((progress or {}).get("observedMetrics") or {}).get(OBSERVATION) or {}
    if hasattr(metrics, "asDict"):   # a Row (PySpark 4's progress objects), a dict in JSON progress
        metrics = metrics.asDict()
    return {k: int(v) for k, v in metrics.items() if v is not None}
