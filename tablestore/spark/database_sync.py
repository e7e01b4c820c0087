"""`tablestore ingest-database`: every table of a source database kept in a managed table of its own by one Spark
Structured Streaming query (Paimon's "database sync", on Spark).

    job = DatabaseIngestJob(spark, DatabaseIngestConfig(database="shop", topic_pattern=r"shop\\.public\\..*", ...))
    progress = job.run()    # until `request_stop()` or, `available_now`, the end of what the topics held

The query reads every topic matching the pattern (Spark's Kafka source with `subscribePattern`: a topic created
later is read from its start at the next micro-batch) and hands each micro-batch to `_batch` (`foreachBatch`):
1. the batch is cached (sorted by source table: each table's decoder reads only the cached batches holding its
   records), and one aggregation finds its source tables (the topic's last segment, or canal's and Maxwell's
   `table` field: those topics carry several tables), their record counts and a sample record each;
2. per source table (kept by `including` / `excluding`), named `<database>.<table prefix><source table>`, the table
   is loaded, or created from its sample record (`create`); then the records of every table are decoded by one
   plan (tablestore/spark/database_decode.py: each table's decoder, tablestore/spark/cdc_decode.py, with the
   table's own schema) and written by one job (tablestore/spark/database_write.py), each table committed
   *idempotently* (commit user `spark-txn-<app id>` from the checkpoint, identifier batch id + 1, as a
   `txnAppId`/`txnVersion` write): one snapshot per table per micro-batch, and a micro-batch Spark runs again after a
   restart commits each table at most once, so every table holds every change exactly once;
3. a decoder error names a record: a schema change alters that table and writes it again (no restart of the
   query: tablestore/spark/ingest_evolve.py); a TRUNCATE (`ingest.truncate` = `apply`) empties it, records the
   barrier and writes it again (tablestore/spark/ingest_truncate.py); a bad record stops the job (`bad_records` =
   `fail`), or is dropped and counted (`skip`).
"""
from __future__ import annotations

import hashlib
import logging
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import catalog
import logstore
from catalog import INGEST_TRUNCATE
from tablestore.cdc import FORMATS, JOB_MAX_OFFSETS_PER_TRIGGER, KnownSchema, known_schema
from tablestore.ingest_report import DATABASE_JOB, IngestReporter
from tablestore.spark.cdc import create_from_record, decode_spec, known_schemas, kafka_stream
from tablestore.spark.cdc_decode import SCHEMA_CHANGE, TRUNCATE
from tablestore.spark.database_decode import decode_tables
from tablestore.spark.ingest_progress import DatabaseIngestProgress
from tablestore.spark.ingest_evolve import IngestError, decoder_error, evolve, stop_message
from tablestore.spark.ingest_truncate import apply_truncate, barrier_of, read_barrier
from tablestore.spark.source_options import TableRef
from tablestore.spark.database_write import Committer, table_of, target_of, write_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from catalog import CatalogTable

log = logging.getLogger(__name__)

ROUTE = "__cdc_table"
WRITERS = 4
"""Tables a micro-batch commits at a time (threads of the driver: each commit waits on Kafka and the file system)."""
_NAMES = "from_json(CAST(value AS STRING), '`database` STRING, `table` STRING')"
_QUALIFIED = f"IF({_NAMES}.`table` IS NULL, NULL, concat_ws('.', {_NAMES}.`database`, {_NAMES}.`table`))"
_ROUTES = {
    "debezium-json": r"element_at(split(topic, '\\.'), -1)",   # Debezium's topic: <prefix>.<schema>.<table>
    "upsert-json": r"element_at(split(topic, '\\.'), -1)",
    "canal-json": _QUALIFIED,   # a canal topic carries several tables, maybe of several databases
    "maxwell-json": _QUALIFIED,
}
"""SQL: the source table of a Kafka record, per format: canal's and Maxwell's `database.table` (two databases' tables
of one name are two sources; the value is parsed once: one `from_json`, its repeats eliminated), which the decoder
is given as its source table (`DecodeSpec.source_table`); the table is named after the last part."""
_BY_RECORD = ("canal-json", "maxwell-json")


@dataclass(frozen=True)
class DatabaseIngestConfig:
    database: str
    topic_pattern: str
    bootstrap_servers: str
    warehouse: str
    format: str = "debezium-json"
    create: bool = False
    including: str | None = None
    excluding: str | None = None
    table_prefix: str = ""
    checkpoint: str | None = None
    available_now: bool = False
    trigger_interval: str = "1 second"
    starting_offsets: str = "earliest"
    bad_records: str = "fail"
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    table_options: Mapping[str, str] = field(default_factory=dict)
    catalog_options: Mapping[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = JOB_MAX_OFFSETS_PER_TRIGGER
    poll_s: float = 1.0


def _matches(pattern: str | None, name: str) -> bool:
    """`name` (a route: `table`, or canal's and Maxwell's `database.table`), or its table alone, matches."""
    return pattern is None or any(re.fullmatch(pattern, n) is not None for n in {name, name.rsplit(".", 1)[-1]})


class DatabaseIngestJob:
    def __init__(self, spark: "SparkSession", config: DatabaseIngestConfig,
                 on_progress: Any = None) -> None:
        if config.format not in FORMATS:
            raise IngestError(f"unknown CDC format {config.format!r}: use one of {', '.join(FORMATS)}")
        self.spark = spark
        self.config = config
        self.on_progress = on_progress
        self.progress = DatabaseIngestProgress(config.database)
        self.checkpoint = config.checkpoint or default_checkpoint(config.warehouse, config.database,
                                                                  config.topic_pattern, config.catalog_options)
        self.app_id = "ingestdb-" + hashlib.sha1(self.checkpoint.encode()).hexdigest()[:16]
        """The idempotent writes' application id: one per checkpoint, as Spark's query id is."""
        self._stop = threading.Event()
        self._query: "StreamingQuery | None" = None
        self._handles: dict[str, "CatalogTable"] = {}
        self._samples: dict[str, list[logstore.KafkaRecord]] = {}
        self._known: dict[str, tuple[KnownSchema, ...]] = {}
        self._committer = Committer(self.app_id)
        self._routes: dict[str, str] = {}
        """Per table: the route (source table) written into it."""
        self._reporters: dict[str, IngestReporter] = {}
        """Per table: the job's reports in it (tablestore.ingest_report)."""

    def table_name(self, source_table: str) -> str:
        """The table of a route, named after its table part (`database.table`: `table`)."""
        return f"{self.config.database}.{self.config.table_prefix}{source_table.rsplit('.', 1)[-1]}"

    def _ref(self, name: str) -> TableRef:
        return TableRef(self.config.warehouse, name, tuple(sorted(_session(self.config.catalog_options).items())))

    def _properties(self) -> dict[str, str]:
        return {"bootstrap.servers": self.config.bootstrap_servers,
                **{k[len("kafka."):]: v for k, v in self.config.kafka_options.items() if k.startswith("kafka.")}}

    def request_stop(self) -> None:
        """Stop after the micro-batch in flight (safe from a signal handler)."""
        self._stop.set()

    # -- the query -----------------------------------------------------------------------------------------------
    def run(self) -> DatabaseIngestProgress:
        from pyspark.errors import StreamingQueryException

        c = self.config
        started = time.monotonic()
        raw = kafka_stream(self.spark, topic_pattern=c.topic_pattern, bootstrap_servers=c.bootstrap_servers,
                           starting_offsets=c.starting_offsets, kafka_options=c.kafka_options,
                           max_offsets_per_trigger=c.max_offsets_per_trigger)
        writer = (raw.writeStream.foreachBatch(self._batch).option("checkpointLocation", self.checkpoint)
                  .queryName(f"tablestore-ingest-database-{c.database}"))
        writer = writer.trigger(availableNow=True) if c.available_now else writer.trigger(
            processingTime=c.trigger_interval)
        self.progress.state = "run"
        query = self._query = writer.start()
        log.info("ingest-database %s: query %s started on topics %s", c.database, query.id, c.topic_pattern)
        try:
            while not query.awaitTermination(c.poll_s):  # type: ignore[arg-type]  # seconds, fractional
                self._report(started)
                if self._stop.is_set():
                    self.progress.state = "stop"
                    while query.status.get("isTriggerActive"):
                        time.sleep(0.1)
                    query.stop()
        except StreamingQueryException as e:
            raise IngestError(stop_message(str(e))) from None
        finally:
            self._committer.close()
        self.progress.state = "done"
        self._report(started)
        return self.progress

    def _report(self, started: float) -> None:
        self.progress.elapsed_s = time.monotonic() - started
        if self.on_progress is not None:
            self.on_progress(self.progress)

    # -- one micro-batch -------------------------------------------------------------------------------------
    def _batch(self, df: "DataFrame", batch_id: int) -> None:
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        began = time.monotonic()
        # a Kafka partition per input partition: each table's write would scan every one of them; merged into a few,
        # each sorted by route, then by Kafka position (a key's changes stay in order): the cache's batches keep
        # each column's bounds, so each table's decoder scans only the batches holding its route instead of all
        # of them (twenty tables: the micro-batch's records read once, not twenty times)
        slots = max(1, int(self.spark.sparkContext.defaultParallelism))
        routed = (df.coalesce(slots).select("*", F.expr(_ROUTES[self.config.format]).alias(ROUTE))
                  .sortWithinPartitions(ROUTE, "topic", "partition", "offset")
                  .persist(StorageLevel.MEMORY_AND_DISK))
        view = f"tablestore_ingest_database_{id(self)}_{batch_id}"
        routed.createOrReplaceTempView(view)   # kept until the batch is written: see decode_tables
        try:
            sample = F.struct("topic", "partition", "offset", "key", "value")
            found = routed.groupBy(ROUTE).agg(
                F.count(F.lit(1)).alias("n"),
                F.first(F.when(F.col("value").isNotNull(), sample), ignorenulls=True).alias("sample")).collect()
            self._phase("find", began)
            wanted = []
            for row in sorted(found, key=lambda r: str(r[ROUTE])):
                source = row[ROUTE]
                if source is None or not _matches(self.config.including, source) or \
                        (self.config.excluding is not None and _matches(self.config.excluding, source)):
                    continue
                name = self.table_name(source)
                if self._routes.setdefault(name, source) != source:
                    raise IngestError(f"source tables {self._routes[name]!r} and {source!r} both go to table "
                                      f"{name!r}: keep one (--including, --excluding) or run a job per source "
                                      f"database")
                wanted.append(row)

            self._write(routed.sparkSession, view, wanted, batch_id)
        finally:
            routed.unpersist()
            routed.sparkSession.catalog.dropTempView(view)
        self.progress.batches += 1
        self.progress.last_batch_s = time.monotonic() - began

    def _table(self, source: str, record: logstore.KafkaRecord | None) -> "CatalogTable | None":
        """The table of `source`, created from `record` with `create`; None when there is nothing to create it from
        (only tombstones or heartbeats so far)."""
        name = self.table_name(source)
        if name in self._handles:
            return self._handles[name]
        ref = self._ref(name)
        cat = catalog.Catalog(ref.warehouse, dict(ref.catalog_options))
        if cat.table_exists(name):
            handle = cat.get_table(name)
        elif not self.config.create:
            raise IngestError(f"table {name!r} (source table {source!r}) does not exist in {self.config.warehouse}: "
                              f"create it, or pass --create (create=True) to create it from its first record")
        elif record is None:
            return None
        else:
            handle = create_from_record(ref, record, self.config.format, self.config.table_options)
            self.progress.created.append(name)
            log.info("ingest-database %s: created %s from topic %s partition %s offset %s", self.config.database,
                     name, record.topic, record.partition, record.offset)
        self._handles[name] = handle
        return handle

    def _write(self, session: "SparkSession", view: str, wanted: list[Any], batch_id: int) -> None:
        """The micro-batch's records of each wanted source table decoded and written into its table by one job,
        then each table committed (tablestore/spark/database_write.py); a decoder error naming a table alters or
        truncates it and the job runs again."""
        from pyspark.sql import Observation

        started = time.monotonic()
        tables: list[tuple[Any, "CatalogTable", str]] = []
        for row in wanted:
            source = row[ROUTE]
            record = None if row["sample"] is None else logstore.KafkaRecord(
                row["sample"]["topic"], row["sample"]["partition"], row["sample"]["offset"],
                _bytes(row["sample"]["key"]), _bytes(row["sample"]["value"]))
            handle = self._table(source, record)
            if handle is not None:
                self._sample(handle.identifier, record)
                tables.append((row, handle, record.topic if record is not None else source))
        self._phase("tables", started)
        while tables:
            began = time.monotonic()
            observation = Observation("cdc")
            specs = []
            for row, handle, topic in tables:
                name = handle.identifier
                if name not in self._known:
                    self._known[name] = known_schemas(handle, self.config.format, self._samples.get(name, []))
                specs.append((row[ROUTE], decode_spec(
                    handle, self.config.format, self.config.bad_records, known=self._known[name],
                    before_images=False, barrier=read_barrier(handle, topic),
                    source_table=row[ROUTE] if self.config.format in _BY_RECORD else None)))
            rows = decode_tables(session, view, ROUTE, specs, observation)
            targets = [target_of(self._ref(handle.identifier), handle) for _, handle, _ in tables]
            began = self._phase("plan", began)
            try:
                messages = write_tables(rows, targets, max(1, int(self.spark.sparkContext.defaultParallelism)))
            except Exception as e:  # noqa: BLE001 - Spark's error text names the decoder's reason, or it is raised
                tables = self._recovered(tables, str(e))
                continue
            began = self._phase("write", began)
            with ThreadPoolExecutor(max(1, min(WRITERS, len(tables)))) as pool:
                for future in [pool.submit(self._committer.commit, handle, messages.get(i, []), batch_id)
                               for i, (_, handle, _) in enumerate(tables)]:
                    future.result()
            self._phase("commit", began)
            committed_ms = time.time() * 1000
            metrics = observation.get
            for i, (row, handle, _) in enumerate(tables):
                self.progress.rows += int(metrics.get(f"rows_{i}") or 0)
                if self.config.bad_records == "skip":
                    self.progress.bad_records += int(metrics.get(f"bad_{i}") or 0)
                self.progress.tables[handle.identifier] = self.progress.tables.get(handle.identifier, 0) + int(row["n"])
                self.progress.events += int(row["n"])
                newest = metrics.get(f"max_ts_{i}")
                if handle.identifier not in self._reporters:
                    self._reporters[handle.identifier] = IngestReporter(handle.store, DATABASE_JOB)
                self._reporters[handle.identifier].report(self.progress.tables[handle.identifier],
                                event_to_commit_s=None if newest is None else max(0.0, (committed_ms - newest) / 1000))
            return

    def _phase(self, name: str, began: float) -> float:
        """`name`'s time since `began` added to the progress; now."""
        now = time.monotonic()
        self.progress.phases_s[name] = self.progress.phases_s.get(name, 0.0) + now - began
        return now

    def _sample(self, name: str, record: logstore.KafkaRecord | None) -> None:
        """Keep `record` as a sample of its table's schemas: the decoder's fast path for records like it."""
        samples = self._samples.setdefault(name, [])
        if record is not None and known_schema(record.value) not in {known_schema(s.value) for s in samples}:
            samples.append(record)
            self._known.pop(name, None)

    def _recovered(self, tables: list[tuple[Any, "CatalogTable", str]], failure: str) -> list[
            tuple[Any, "CatalogTable", str]]:
        """The tables after the failed job's decoder error, the one it names altered or truncated
        (IngestError when it names none of them, or when it cannot be handled)."""
        named = table_of(decoder_error(failure)[1])
        for i, (row, handle, topic) in enumerate(tables):
            if handle.identifier == named:
                fixed = self._recover(handle, topic, failure)
                self._handles[fixed.identifier] = fixed
                self._known.pop(fixed.identifier, None)
                return [*tables[:i], (row, fixed, topic), *tables[i + 1:]]
        raise IngestError(stop_message(failure))

    def _recover(self, handle: "CatalogTable", topic: str, failure: str) -> "CatalogTable":
        """After a failed write of `handle`'s records: the table altered for a schema change, or emptied for a
        TRUNCATE, so that the write can run again; IngestError for anything else."""
        marker, message = decoder_error(failure)
        if marker == SCHEMA_CHANGE:
            altered, change = evolve(self._ref(handle.identifier), handle, failure, self.config.format,
                                     self._properties(), self._samples.setdefault(handle.identifier, []))
            self.progress.schema_changes.append(f"{handle.identifier}: {change}")
            return altered
        barrier = barrier_of(failure) if marker == TRUNCATE else None
        if barrier is not None and handle.options.get(INGEST_TRUNCATE) == "apply":
            deleted = apply_truncate(handle, barrier.topic, barrier)
            self.progress.truncates += 1
            log.info("ingest-database %s: TRUNCATE of %s at topic %s partition %s offset %s: %s rows deleted",
                     self.config.database, handle.identifier, barrier.topic, barrier.partition, barrier.offset,
                     deleted)
            return handle
        raise IngestError(message)


def _session(options: Mapping[str, str]) -> dict[str, str]:
    """Catalog options as the catalog takes them (`table-storage.<table option>`)."""
    return {("table-storage." + k if not k.startswith("table-storage.") else k): v for k, v in options.items()}


def _bytes(value: Any) -> bytes | None:
    return None if value is None else bytes(value)


def default_checkpoint(warehouse: str, database: str, topic_pattern: str,
                       catalog_options: Mapping[str, str] | None = None) -> str:
    """`<database dir>/_ingest/database-<hash of the pattern>`: the database's directory keeps the job's state (not
    a table: it has no schema); on S3 an `s3a://` URL (Spark's JVM writes the checkpoint through S3A)."""
    from tablestore.spark.s3a import jvm_url

    cat = catalog.Catalog(warehouse, _session(catalog_options or {}))
    digest = hashlib.sha1(topic_pattern.encode()).hexdigest()[:12]
    return jvm_url(cat.io.object_store, f"{cat.database_path(database)}/_ingest/database-{digest}")


def ingest_database(spark: "SparkSession", database: str, topic_pattern: str, bootstrap_servers: str,
                    warehouse: str, *, format: str = "debezium-json", create: bool = False,
                    including: str | None = None, excluding: str | None = None, table_prefix: str = "",
                    checkpoint: str | None = None, available_now: bool = False, trigger_interval: str = "1 second",
                    starting_offsets: str = "earliest", bad_records: str = "fail",
                    kafka_options: Mapping[str, str] | None = None, table_options: Mapping[str, str] | None = None,
                    max_offsets_per_trigger: int | None = JOB_MAX_OFFSETS_PER_TRIGGER) -> DatabaseIngestProgress:
    """Keep every table of a source database whose changes the topics matching `topic_pattern` carry in a table
    `<database>.<table_prefix><source table>` of `warehouse`, with one Spark query (see the module docstring).
    Blocks until the end of what the topics held with `available_now`, else until interrupted; the progress."""
    config = DatabaseIngestConfig(
        database=database, topic_pattern=topic_pattern, bootstrap_servers=bootstrap_servers, warehouse=warehouse,
        format=format, create=create, including=including, excluding=excluding, table_prefix=table_prefix,
        checkpoint=checkpoint, available_now=available_now, trigger_interval=trigger_interval,
        starting_offsets=starting_offsets, bad_records=bad_records, kafka_options=dict(kafka_options or {}),
        table_options=dict(table_options or {}), max_offsets_per_trigger=max_offsets_per_trigger)
    job = DatabaseIngestJob(spark, config)
    try:
        return job.run()
    except KeyboardInterrupt:
        if job._query is not None:
            job._query.stop()
        return job.progress
