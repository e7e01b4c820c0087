"""`tablestore ingest`: a database's change stream in Kafka kept in a managed table by one Spark Structured
Streaming job, exactly once, evolving the table when the source's schema changes.

    job = IngestJob(spark, IngestConfig(table="shop.orders", topic="shop.public.orders", ...), on_progress=print)
    summary = job.run()          # until `request_stop()` (SIGINT/SIGTERM in the CLI) or, `available_now`, the end

The job is Spark's Kafka source → the CDC decoder (tablestore/spark/cdc_decode.py, in the JVM) → the `managed`
streaming sink (tablestore/spark/stream_write.py), with a checkpoint (default: under the table's directory, so a
plain restart resumes). Exactly once is the sink's: each micro-batch is one snapshot committed as
(`spark-stream-<query id>`, batch id + 1) with its Kafka log transaction; a batch Spark replays is recognised.

The run, as a state machine (`run`):
1. RESOLVE: load the table (create it from the first record with `create`);
2. RUN: start the query on the table's current schema; every `poll_s` report progress (events/s, Kafka lag,
   snapshots committed, the last commit's latency, bad records skipped);
3. a decoder error marked SCHEMA_CHANGE (a record with columns the table lacks, a wider declared type, a number too
   large for its column) ends the query before its micro-batch commits: EVOLVE reads that record from Kafka,
   works out the change (tablestore.cdc.evolution) and, if `ingest.schema-evolution` is `add-columns`, alters the
   table (new nullable columns at the end, widened types) and goes back to RUN from the same checkpoint (Spark
   replays the micro-batch, now decoded with the new schema); with `fail`, or a change no table can follow, the
   job stops with an error naming the column and both types;
4. STOP: on `request_stop()` the job waits for the micro-batch in flight to commit, then stops the query; with
   `available_now` the query stops by itself once the topic is read to the end it saw at the start.
A bad record (`bad_records="fail"`) fails the job naming topic, partition, offset and reason; nothing of its
micro-batch is committed and a restart resumes there.
"""
from __future__ import annotations

import enum
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

import pyarrow as pa

import catalog
import logstore
from catalog import INGEST_SCHEMA_EVOLUTION
from filestore import widens
from tablestore.cdc import CdcSchemaError, evolution, record_schema
from tablestore.cdc.schemas import Evolution
from tablestore.errors import TableStoreError
from tablestore.spark.cdc import decode_spec, kafka_stream, known_schemas, observed, resolve_table
from tablestore.spark.cdc_decode import BAD_RECORD, SCHEMA_CHANGE, changes
from tablestore.spark.source_options import TableRef
from tablestore.spark.ingest_progress import (IngestProgress, end_offsets, event_latencies, lag, last_progress,
                                               status)
from tablestore.spark.stream_write import commit_user

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from catalog import CatalogTable

log = logging.getLogger(__name__)


class IngestError(TableStoreError):
    """The ingest job stopped on bad input or a schema change the table cannot follow; nothing of the micro-batch
    it stopped at was committed, and a restart resumes there."""


class State(enum.Enum):
    RESOLVE = "resolve"
    RUN = "run"
    EVOLVE = "evolve"
    STOP = "stop"
    DONE = "done"


@dataclass(frozen=True)
class IngestConfig:
    table: str
    topic: str
    bootstrap_servers: str
    warehouse: str
    format: str = "debezium-json"
    create: bool = False
    checkpoint: str | None = None
    available_now: bool = False
    trigger_interval: str = "1 second"
    starting_offsets: str = "earliest"
    bad_records: str = "fail"
    kafka_options: Mapping[str, str] = field(default_factory=dict)
    table_options: Mapping[str, str] = field(default_factory=dict)
    catalog_options: Mapping[str, str] = field(default_factory=dict)
    max_offsets_per_trigger: int | None = None
    poll_s: float = 1.0


def default_checkpoint(handle: "CatalogTable", topic: str) -> str:
    """`<table>/checkpoint/ingest-<topic>`: the table's directory keeps its ingest job's state (filestore.paths); on
    S3 an `s3a://` URL (Spark's JVM writes it through Hadoop's S3A: tablestore/spark/s3a.py)."""
    from tablestore.spark.s3a import jvm_url

    return jvm_url(handle.store.io.object_store, f"{handle.store.paths.checkpoint_dir}/ingest-{topic}")


_WHERE = re.compile(r"in topic (?P<topic>\S+) partition (?P<partition>\d+) offset (?P<offset>\d+): (?P<detail>[^\n]*)")
_DECODER_MESSAGE = re.compile(
    rf"(?P<marker>{BAD_RECORD}|{SCHEMA_CHANGE}): (?P<message>table [^\n(]*? in topic \S+ partition \d+ offset \d+: [^\n]*)")
_COLUMN = re.compile(r"column (?P<column>\S+): cannot read")


class IngestJob:
    def __init__(self, spark: "SparkSession", config: IngestConfig,
                 on_progress: Callable[[IngestProgress], None] | None = None) -> None:
        self.spark = spark
        self.config = config
        self.on_progress = on_progress
        self.progress = IngestProgress(config.table)
        self.state = State.RESOLVE
        self._stop = threading.Event()
        self._query: "StreamingQuery | None" = None
        self._seen_batches: set[int] = set()
        self._samples: list[logstore.KafkaRecord] = []
        self.commits: list[tuple[dict[int, int], int]] = []
        """Per micro-batch committed: the Kafka offsets it read up to (per partition) and its snapshot's time (ms)."""
        self.checkpoint: str | None = None

    def event_latencies(self, events: list[tuple[int, int, float]]) -> list[float]:
        """For events given as (partition, offset, made at in epoch seconds): the seconds from each one's making to
        the commit of the snapshot that holds it (the events of micro-batches not committed yet are left out)."""
        return event_latencies(self.commits, events)

    def _properties(self) -> dict[str, str]:
        return {"bootstrap.servers": self.config.bootstrap_servers, **_kafka_properties(self.config)}

    def request_stop(self) -> None:
        """Stop after the micro-batch in flight commits (safe from a signal handler)."""
        self._stop.set()

    # -- the state machine -----------------------------------------------------------------------------------
    def run(self) -> IngestProgress:
        started = time.monotonic()
        ref = TableRef(self.config.warehouse, self.config.table,
                       tuple(sorted(("table-storage." + k if not k.startswith("table-storage.") else k, v)
                                    for k, v in self.config.catalog_options.items())))
        handle = resolve_table(ref, topic=self.config.topic, bootstrap_servers=self.config.bootstrap_servers,
                               format=self.config.format, create=self.config.create,
                               starting_offsets=self.config.starting_offsets,
                               table_options=self.config.table_options)
        self.checkpoint = self.config.checkpoint or default_checkpoint(handle, self.config.topic)
        from tablestore.spark.s3a import is_s3, jvm_has_s3a

        if is_s3(self.checkpoint) and not jvm_has_s3a(self.spark):
            raise IngestError(f"checkpoint {self.checkpoint}: this Spark session has no S3A file system (hadoop-aws, "
                              "which tablestore.spark.session adds for an S3 warehouse when mvn can fetch it: "
                              "docs/spark.md); give --checkpoint a path every node of the job reaches")
        self._samples = logstore.edge_records(self._properties(), self.config.topic)
        while True:
            self.state = self.progress_state(State.RUN)
            query = self._start(handle)
            failure = self._watch(query, started)
            if failure is None:
                self.state = self.progress_state(State.DONE)
                self._report(started)
                return self.progress
            marker, message = _decoder_error(failure)
            if marker != SCHEMA_CHANGE:
                raise IngestError(message) from None
            self.state = self.progress_state(State.EVOLVE)
            handle = self._evolve(ref, handle, failure)

    def progress_state(self, state: State) -> State:
        self.progress.state = state.value
        return state

    def _start(self, handle: "CatalogTable") -> "StreamingQuery":
        c = self.config
        raw = kafka_stream(self.spark, topic=c.topic, bootstrap_servers=c.bootstrap_servers,
                           starting_offsets=c.starting_offsets, kafka_options=c.kafka_options,
                           max_offsets_per_trigger=c.max_offsets_per_trigger)
        known = known_schemas(handle, c.format, self._samples)
        decoded = changes(raw, decode_spec(handle, c.format, c.bad_records, known=known, before_images=False))
        writer = (decoded.writeStream.format("managed").option("checkpointLocation", self.checkpoint)
                  .option("warehouse", c.warehouse).queryName(f"tablestore-ingest-{c.table}"))
        for key, value in c.catalog_options.items():
            writer = writer.option(key if key.startswith("table-storage.") else "table-storage." + key, value)
        writer = writer.trigger(availableNow=True) if c.available_now else writer.trigger(
            processingTime=c.trigger_interval)
        self._query = writer.start(c.table)
        log.info("ingest %s: query %s started from topic %s", c.table, self._query.id, c.topic)
        return self._query

    def _watch(self, query: "StreamingQuery", started: float) -> str | None:
        """Follow `query` until it ends: None when it ended cleanly (available-now, or stopped on request), else
        the text of its failure."""
        from pyspark.errors import StreamingQueryException

        stopping = False
        stop_after: int | None = None
        while True:
            try:
                if query.awaitTermination(self.config.poll_s):  # type: ignore[arg-type]  # seconds, fractional
                    self._update(query, started)
                    return None
            except StreamingQueryException as e:
                self._update(query, started)
                return str(e)
            self._update(query, started)
            if self._stop.is_set() and not stopping:
                stopping = True
                self.state = self.progress_state(State.STOP)
                active = bool(status(query).get("isTriggerActive"))
                last = last_progress(query).get("batchId")
                stop_after = (int(last) + 1) if active and last is not None else None
                if stop_after is None:
                    query.stop()
                    continue
            if stopping and stop_after is not None:
                done = last_progress(query).get("batchId")
                if (done is not None and int(done) >= stop_after) or not status(query).get("isTriggerActive"):
                    query.stop()
                    stop_after = None

    def _update(self, query: "StreamingQuery", started: float) -> None:
        p = self.progress
        p.elapsed_s = time.monotonic() - started
        for progress in query.recentProgress or []:
            batch = int(progress.get("batchId", -1))
            if batch in self._seen_batches:
                continue
            self._seen_batches.add(batch)
            rows = int(progress.get("numInputRows") or 0)
            p.events += rows
            p.batches += 1
            metrics = observed(progress)
            p.rows += metrics.get("rows", 0)
            if self.config.bad_records == "skip":
                p.bad_records += metrics.get("bad", 0)
            p.events_per_s = float(progress.get("processedRowsPerSecond") or 0.0)
            p.lag = lag(progress)
            if rows:
                self._commit_latency(query, batch, metrics.get("max_ts_ms"), end_offsets(progress))
        if self.on_progress is not None:
            self.on_progress(p)

    def _commit_latency(self, query: "StreamingQuery", batch: int, max_ts_ms: int | None,
                        ends: dict[int, int]) -> None:
        """The snapshot of micro-batch `batch`: counted, and how long after the batch's start (and after its newest
        event) it was committed."""
        store = catalog.Catalog(self.config.warehouse).get_table(self.config.table).store
        user = commit_user(str(query.id))
        snapshot = store.snapshots.latest()
        while snapshot is not None and snapshot.id > 0:
            if snapshot.commit_user == user and snapshot.commit_identifier == batch + 1 and \
                    snapshot.commit_kind.value == "APPEND":
                break
            if snapshot.commit_user == user and snapshot.commit_identifier < batch + 1:
                return
            snapshot = store.snapshots.get(snapshot.id - 1) if snapshot.id > 1 else None
        if snapshot is None:
            return
        self.progress.snapshots += 1
        self.commits.append((ends, snapshot.time_millis))
        recent: dict[int, dict[str, Any]] = {int(q.get("batchId", -1)): q for q in query.recentProgress or []}
        started_at = recent.get(batch, {}).get("timestamp")
        if started_at:
            import datetime as dt

            start_ms = dt.datetime.fromisoformat(str(started_at).replace("Z", "+00:00")).timestamp() * 1000
            self.progress.last_commit_s = max(0.0, (snapshot.time_millis - start_ms) / 1000)
        if max_ts_ms:
            self.progress.event_to_commit_s = max(0.0, (snapshot.time_millis - max_ts_ms) / 1000)

    def _report(self, started: float) -> None:
        self.progress.elapsed_s = time.monotonic() - started
        if self.on_progress is not None:
            self.on_progress(self.progress)

    # -- schema evolution ------------------------------------------------------------------------------------
    def _evolve(self, ref: TableRef, handle: "CatalogTable", failure: str) -> "CatalogTable":
        c = self.config
        where = _WHERE.search(_message(failure))
        if where is None:
            raise IngestError(_message(failure))
        detail = where.group("detail")
        record = logstore.record_at(self._properties(), where.group("topic"), int(where.group("partition")),
                                    int(where.group("offset")))
        self._samples.append(record)   # the decoder's fast path for the new schema from the restart on
        schema = handle.schema.arrow_schema
        try:
            found = record_schema(c.format, record.key, record.value)
            change = evolution(handle.identifier, schema, found, tuple(handle.schema.primary_keys))
            column = _COLUMN.search(detail)
            if not change and column is not None:
                change = _widen_overflow(handle, found, column.group("column"), detail)
        except CdcSchemaError as e:
            raise IngestError(f"{e} (at topic {record.topic} partition {record.partition} offset {record.offset})") \
                from None
        if not change:
            raise IngestError(f"table {handle.identifier!r}: the record at topic {record.topic} partition "
                              f"{record.partition} offset {record.offset} was taken for a schema change ({detail}), "
                              f"but the table already takes its columns")
        policy = handle.options.get(INGEST_SCHEMA_EVOLUTION)
        if policy == "fail":
            raise IngestError(f"table {handle.identifier!r}: the source's schema changed at topic {record.topic} "
                              f"partition {record.partition} offset {record.offset} ({change.describe()}) and "
                              f"{INGEST_SCHEMA_EVOLUTION.key} is 'fail'")
        altered = self._alter(ref, handle, change)
        self.progress.schema_changes.append(change.describe())
        log.info("ingest %s: %s at topic %s partition %s offset %s", handle.identifier, change.describe(),
                 record.topic, record.partition, record.offset)
        return altered

    def _alter(self, ref: TableRef, handle: "CatalogTable", change: Evolution) -> "CatalogTable":
        cat = catalog.Catalog(ref.warehouse, dict(ref.catalog_options))
        try:
            return cat.alter_table(handle.identifier, add_columns=list(change.add_columns),
                                   alter_column_types=dict(change.widen))
        except catalog.CatalogError as e:
            raise IngestError(str(e)) from None


def _widen_overflow(handle: "CatalogTable", found: Any, column: str, detail: str) -> Evolution:
    """A number too large for its column (the record declares no types): widen to the type the record's value
    suggests (int64 for an integer, double for a float column, decimal(38, s) for a decimal)."""
    schema: pa.Schema = handle.schema.arrow_schema
    if column not in schema.names:
        return Evolution()
    old = schema.field(column).type
    new = pa.decimal128(38, old.scale) if pa.types.is_decimal(old) else (
        pa.float64() if pa.types.is_floating(old) else pa.int64())
    if column in handle.schema.primary_keys or not widens(old, new):
        raise CdcSchemaError(f"table {handle.identifier!r}: {detail}; column {column!r} of type {old} cannot widen "
                             f"to {new}" + (" (a primary-key column's type cannot change)"
                                            if column in handle.schema.primary_keys else ""))
    return Evolution(widen=((column, new),))


def _kafka_properties(config: IngestConfig) -> dict[str, str]:
    """The Spark Kafka source's `kafka.*` options as client properties (security settings and the like)."""
    return {k[len("kafka."):]: v for k, v in config.kafka_options.items() if k.startswith("kafka.")}


_PYTHON_ERROR = re.compile(r"^((?:\w+\.)*\w*(?:Error|Exception): .+)$", re.MULTILINE)


def _decoder_error(failure: str) -> tuple[str | None, str]:
    """The decoder's marker (BAD_RECORD, SCHEMA_CHANGE or None) and its message line out of Spark's exception text.
    The text also holds the query's plan, whose decoder expressions hold both markers (before the message on
    PySpark 4.1, after it on 4.2+): the message is the marker followed by a record's topic, partition and offset."""
    found = _DECODER_MESSAGE.search(failure)
    if found is None:
        first = failure.strip().split("\n")[0]
        head, traceback, rest = first.partition("Traceback (most recent call last)")
        raised = _PYTHON_ERROR.findall(failure) if traceback else []   # a Python error: its exception line
        return None, head + raised[-1] if raised else first
    line = re.sub(r"\s*SQLSTATE: \w+\s*$", "", found.group("message"))
    return found.group("marker"), line.rstrip(" .'\"")


def _message(failure: str) -> str:
    """The decoder's own message out of Spark's exception text (marker dropped), else Spark's first line."""
    return _decoder_error(failure)[1]
