"""A database's change stream in Kafka as a streaming DataFrame of a managed table's changes:

    changes = tablestore.spark.read_cdc(spark, topic="shop.public.orders", bootstrap_servers="127.0.0.1:19092",
                                        format="debezium-json", table="shop.orders")
    changes.writeStream.format("managed").option("checkpointLocation", ck).start("shop.orders")

Spark's own Kafka source reads the topic (`session(kafka=True)` puts it on the classpath: tablestore/spark/kafka.py);
tablestore/spark/cdc_decode.py decodes it in the JVM. The DataFrame's schema is the table's when `read_cdc` is
called; a record with columns the table does not have (or a wider type) stops the stream with an error saying so:
`tablestore ingest` (tablestore/spark/ingest.py) is the job that evolves the table and carries on.
`create=True` creates a missing table (and its database) from the first record's schema (tablestore/cdc).

A topic may carry several source tables (canal's and Maxwell's usual deployment; Debezium's with a topic router):
`source_table` (`table`, `database.table` or `schema.table`, `database.schema.table`) keeps the records of one, the
others giving no rows (tablestore/spark/cdc_formats.py). Without it, on `canal-json` and `maxwell-json` the source
table is chosen from a record (`resolve_table`): the one the table is created from; for an existing table, the
first sampled record whose columns the table has all of (else the first naming a table). Records of any other table
never reach the table, nor its schema. `debezium-json` without it takes every record (its topics are one table each
by default), `upsert-json` always (its records name no table).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence, cast

import logstore
from catalog import INGEST_TRUNCATE
from tablestore.cdc import FORMATS, CdcSchemaError, KnownSchema, evolution, known_schema, record_schema
from tablestore.cdc.schemas import record_source, source_table_parts
from tablestore.errors import TableStoreError
from tablestore.spark.cdc_decode import BadRecords, DecodeSpec, changes
from tablestore.spark.cdc_formats import TruncateBarrier, TruncatePolicy
from tablestore.spark.source_options import DataSourceOptionError, TableRef, table_ref

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from catalog import CatalogTable

StartingOffsets = Literal["earliest", "latest"]
BAD_RECORDS = ("fail", "skip")
CHOSEN_SOURCE = ("canal-json", "maxwell-json")
"""Formats whose topic usually carries several tables: without a source table, one is chosen from a record."""
SAMPLE_RECORDS = 100
"""Records sampled at each end of each partition (the newest: 4x) to create a table from or choose its source."""


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


@dataclass(frozen=True)
class ResolvedTable:
    """The table a CDC job writes and the source table whose records it takes."""

    handle: "CatalogTable"
    source_table: str | None
    """None: every record's."""
    chosen: str | None = None
    """How the source table was chosen when none was given (for the log and the progress), else None."""


def check_source_table(format: str, source_table: str | None) -> str | None:
    """`source_table`, checked for `format`: CdcSourceError for a malformed name or an upsert-json source."""
    if source_table is None:
        return None
    if format == "upsert-json":
        raise CdcSourceError(f"source table {source_table!r}: upsert-json records name no source table (its topic is "
                             f"one table): a source table applies to debezium-json, canal-json and maxwell-json")
    try:
        source_table_parts(source_table)
    except CdcSchemaError as e:
        raise CdcSourceError(str(e)) from None
    return source_table


def resolve_table(ref: TableRef, *, topic: str, bootstrap_servers: str, format: str, create: bool,
                  source_table: str | None = None, starting_offsets: str = "earliest",
                  table_options: Mapping[str, str] | None = None, wait_s: float = 30.0,
                  properties: Mapping[str, str] | None = None) -> ResolvedTable:
    """The table `ref` names and its source table; with `create`, a missing table is created (with its database)
    from a record of `topic` of the source table (its first sampled one, waiting up to `wait_s` for one on an
    empty topic), its primary key from the record key. Without `source_table`, canal's and Maxwell's source table
    is chosen from a record (module docstring). Without `create` a missing table is a CdcSourceError naming it.
    `properties`: the Kafka client's (default: the bootstrap servers alone)."""
    import catalog

    check_source_table(format, source_table)
    props = dict(properties or {"bootstrap.servers": bootstrap_servers})
    cat = catalog.Catalog(ref.warehouse, dict(ref.catalog_options))
    exists = cat.table_exists(ref.identifier)
    choose = source_table is None and format in CHOSEN_SOURCE
    if exists and not choose:
        return ResolvedTable(cat.get_table(ref.identifier), source_table)
    if not exists and not create:
        raise CdcSourceError(f"table {ref.identifier!r} does not exist in {ref.warehouse}: create it, or pass "
                             f"--create (create=True) to create it from the first record of topic {topic!r}")
    latest = starting_offsets == "latest"
    if not choose and source_table is None:   # a topic of one table: its first record
        first = logstore.first_record(props, topic, latest=latest, timeout_s=wait_s)
        if first is None:
            raise CdcSourceError(f"table {ref.identifier!r}: topic {topic!r} had no record within {wait_s:.0f} s to "
                                 f"create the table from")
        return ResolvedTable(create_from_record(ref, first, format, table_options), None)
    handle = cat.get_table(ref.identifier) if exists else None
    records = sample_records(props, topic, latest=latest, wait_s=wait_s)
    record = pick_record(format, records, source_table, None if handle is None else handle.schema.arrow_schema)
    if record is None:
        what = f"of source table {source_table!r}" if source_table else "naming a source table and its columns"
        to = ("choose the source table by: pass --source-table (source_table=)" if handle is not None else
              "create the table from: create it yourself" + (", or check the source table" if source_table else ""))
        raise CdcSourceError(f"table {ref.identifier!r}: no record {what} among the {len(records)} sampled from "
                             f"topic {topic!r} (the oldest {SAMPLE_RECORDS} and newest {4 * SAMPLE_RECORDS} of each "
                             f"partition, or the first within {wait_s:.0f} s) to {to}")
    where = f"topic {record.topic} partition {record.partition} offset {record.offset}"
    chosen = None
    if source_table is None:
        found = record_source(format, record.value)
        assert found is not None   # pick_record takes only records naming one
        source_table = found.name
        chosen = (f"the table of the record at {where}, which the table was created from" if handle is None else
                  f"the table of the record at {where}, the first sampled whose columns the table has")
    if handle is None:
        handle = create_from_record(ref, record, format, table_options)
    return ResolvedTable(handle, source_table, chosen)


def sample_records(properties: Mapping[str, str], topic: str, *, latest: bool = False,
                   wait_s: float = 30.0) -> list[logstore.KafkaRecord]:
    """Records of `topic` to create a table from or choose its source table by: the oldest `SAMPLE_RECORDS` and
    the newest of each partition, oldest first (`latest`: newest first); of an empty topic, the first record that
    arrives within `wait_s` (none: empty)."""
    records = logstore.edge_records(properties, topic, per_end=SAMPLE_RECORDS)
    if not records:
        first = logstore.first_record(properties, topic, latest=latest, timeout_s=wait_s)
        records = [] if first is None else [first]
    return records[::-1] if latest else records


def pick_record(format: str, records: Sequence[logstore.KafkaRecord], source_table: str | None,
                schema: "pa.Schema | None" = None) -> logstore.KafkaRecord | None:
    """The first of `records` naming `source_table` (None: naming any table) whose columns it carries; with the
    `schema` of an existing table, the first whose columns the table has all of, if any."""
    candidates: list[tuple[logstore.KafkaRecord, set[str]]] = []
    for r in records:
        found = record_source(format, r.value)
        if found is None or not found.table or (source_table is not None and not found.matches(source_table)):
            continue
        try:
            columns = {f.name for f in record_schema(format, r.key, r.value).fields}
        except CdcSchemaError:
            continue   # a DDL event, a delete without its row: it names no columns
        candidates.append((r, columns))
    if schema is not None:
        fitting = [r for r, columns in candidates if columns <= set(schema.names)]
        if fitting:
            return fitting[0]
    return candidates[0][0] if candidates else None


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
                before_images: bool = True, barrier: TruncateBarrier | None = None,
                source_table: str | None = None) -> DecodeSpec:
    """How to decode `format` records into `handle`'s table; `barrier`: the last TRUNCATE an ingest job applied
    (tablestore/spark/ingest_truncate.py); `source_table`: the source table whose records are the table's (None:
    every record's)."""
    if bad_records not in BAD_RECORDS:
        raise CdcSourceError(f"bad_records must be one of {BAD_RECORDS}, not {bad_records!r}")
    mode: BadRecords = "skip" if bad_records == "skip" else "fail"
    truncate = cast(TruncatePolicy, handle.options.get(INGEST_TRUNCATE))
    return DecodeSpec(check_format(format), handle.identifier, handle.schema.arrow_schema,
                      tuple(handle.schema.primary_keys), mode, known, before_images, truncate, barrier,
                      check_source_table(format, source_table))


def read_cdc(spark: "SparkSession", topic: str, bootstrap_servers: str, format: str = "debezium-json",
             table: str | None = None, *, warehouse: str | None = None, starting_offsets: str = "earliest",
             bad_records: str = "fail", create: bool = False, kafka_options: Mapping[str, str] | None = None,
             max_offsets_per_trigger: int | None = None, table_options: Mapping[str, str] | None = None,
             source_table: str | None = None) -> "DataFrame":
    """A streaming DataFrame of the changes `topic` carries in `format` (`debezium-json`, `upsert-json`,
    `canal-json`, `maxwell-json`), as `table`'s changelog: `_row_kind` (+I/-U/+U/-D) + its columns, ready for
    `writeStream.format("managed")`. `bad_records`: `fail` (default) stops at the first record that is not valid
    for its format, naming topic, partition, offset and reason; `skip` drops and counts them (the observed metric
    `tablestore_cdc.bad` of the query's progress). `create`: create a missing table from the first record (of the
    source table). `source_table`: the source table whose records the topic's are (module docstring)."""
    if table is None:
        raise DataSourceOptionError("read_cdc needs the table whose changes the topic carries (table='db.t')")
    check_format(format)
    ref = table_ref({"path": table} | ({"warehouse": warehouse} if warehouse else {}))
    resolved = resolve_table(ref, topic=topic, bootstrap_servers=bootstrap_servers, format=format, create=create,
                             source_table=source_table, starting_offsets=starting_offsets,
                             table_options=table_options)
    if resolved.chosen is not None:
        log.info("read_cdc %s: source table %s (%s)", ref.identifier, resolved.source_table, resolved.chosen)
    raw = kafka_stream(spark, topic=topic, bootstrap_servers=bootstrap_servers, starting_offsets=starting_offsets,
                       kafka_options=kafka_options, max_offsets_per_trigger=max_offsets_per_trigger)
    sample = logstore.edge_records({"bootstrap.servers": bootstrap_servers}, topic)
    handle = resolved.handle
    return changes(raw, decode_spec(handle, format, bad_records, known=known_schemas(handle, format, sample),
                                    source_table=resolved.source_table))


def observed(progress: Mapping[str, Any] | None) -> dict[str, int]:
    """The decoder's observed metrics of one micro-batch's progress (`query.lastProgress`): rows, bad, max_ts_ms."""
    from tablestore.spark.cdc_decode import OBSERVATION

    metrics: Any = ((progress or {}).get("observedMetrics") or {}).get(OBSERVATION) or {}
    if hasattr(metrics, "asDict"):   # a Row (PySpark 4's progress objects), a dict in JSON progress
        metrics = metrics.asDict()
    return {k: int(v) for k, v in metrics.items() if v is not None}
