"""`tablestore ingest`: a database's change stream in Kafka kept in a managed table by one Spark Structured
Streaming job, exactly once, evolving the table when the source's schema changes.

    job = IngestJob(spark, IngestConfig(table="shop.orders", topic="shop.public.orders", ...), on_progress=print)
    summary = job.run()          # until `request_stop()` (SIGINT/SIGTERM in the CLI) or, `available_now`, the end

The job is Spark's Kafka source → the CDC decoder (tablestore/spark/cdc_decode.py, in the JVM) → the `managed`
streaming sink (tablestore/spark/stream_write.py), with a checkpoint (default: under the table's directory, so a
plain restart resumes). Exactly once is the sink's: each micro-batch is one snapshot committed as
(`spark-stream-<query id>`, batch id + 1) with its Kafka log transaction; a batch Spark replays is recognised.

The run, as a state machine (`run`):
1. RESOLVE: load the table (create it from the first record with `create`) and settle its source table: the
   configured `source_table`, else on canal-json and maxwell-json the table of the record it was created from (an
   existing table: the first sampled record whose columns the table has), logged and in the progress
   (tablestore/spark/cdc.py); records of other source tables give no rows;
2. RUN: start the query on the table's current schema; every `poll_s` report progress (events/s, Kafka lag,
   snapshots committed, the last commit's latency, bad records skipped);
3. a decoder error marked SCHEMA_CHANGE ends the query before its micro-batch commits: EVOLVE alters the table
   (tablestore/spark/ingest_evolve.py) and goes back to RUN from the same checkpoint (Spark replays the micro-batch,
   now decoded with the new schema); a change no table can follow stops the job with an error naming the column and
   both types. A decoder error marked TRUNCATE (`ingest.truncate` = `apply`): TRUNCATE empties the table and records
   the truncate's position (tablestore/spark/ingest_truncate.py), then RUN again: the replayed micro-batch gives no
   rows for the records before it;
4. STOP: on `request_stop()` the job waits for the micro-batch in flight to commit, then stops the query; with
   `available_now` the query stops by itself once the topic is read to the end it saw at the start.
A bad record (`bad_records="fail"`) fails the job naming topic, partition, offset and reason; nothing of its
micro-batch is committed and a restart resumes there.
"""
from __future__ import annotations

import enum
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

import catalog
import logstore
from catalog import INGEST_TRUNCATE
from tablestore.cdc import JOB_MAX_OFFSETS_PER_TRIGGER
from tablestore.ingest_report import INGEST_JOB, IngestReporter
from tablestore.spark.cdc import decode_spec, kafka_stream, known_schemas, observed, resolve_table
from tablestore.spark.cdc_decode import SCHEMA_CHANGE, TRUNCATE, changes
from tablestore.spark.ingest_evolve import IngestError, decoder_error, evolve, stop_message
from tablestore.spark.ingest_truncate import apply_truncate, barrier_of, read_barrier
from tablestore.spark.source_options import TableRef
from tablestore.spark.ingest_progress import (IngestProgress, end_offsets, event_latencies, lag, last_progress,
                                               status)
from tablestore.spark.stream_write import commit_user

__all__ = ["IngestConfig", "IngestError", "IngestJob", "State", "default_checkpoint"]

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from catalog import CatalogTable
    from filestore import FileStore

log = logging.getLogger(__name__)


class State(enum.Enum):
    RESOLVE = "resolve"
    RUN = "run"
    EVOLVE = "evolve"
    TRUNCATE = "truncate"
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
    max_offsets_per_trigger: int | None = JOB_MAX_OFFSETS_PER_TRIGGER
    poll_s: float = 1.0
    source_table: str | None = None
    """The source table whose records the topic's are (`table`, `database.table`, `database.schema.table`): others
    give no rows. None: chosen from a record on canal-json and maxwell-json, every record's otherwise."""


def default_checkpoint(handle: "CatalogTable", topic: str) -> str:
    """`<table>/checkpoint/ingest-<topic>`: the table's directory keeps its ingest job's state (filestore.paths); on
    S3 an `s3a://` URL (Spark's JVM writes it through Hadoop's S3A: tablestore/spark/s3a.py)."""
    from tablestore.spark.s3a import jvm_url

    return jvm_url(handle.store.io.object_store, f"{handle.store.paths.checkpoint_dir}/ingest-{topic}")


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
        self.source_table: str | None = config.source_table
        self._reporter: IngestReporter | None = None

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
        resolved = resolve_table(ref, topic=self.config.topic, bootstrap_servers=self.config.bootstrap_servers,
                                 format=self.config.format, create=self.config.create,
                                 source_table=self.config.source_table, starting_offsets=self.config.starting_offsets,
                                 table_options=self.config.table_options, properties=self._properties())
        handle = resolved.handle
        self.source_table = self.progress.source_table = resolved.source_table
        if resolved.chosen is not None:
            log.info("ingest %s: source table %s (%s; --source-table chooses another)", handle.identifier,
                     resolved.source_table, resolved.chosen)
        self.checkpoint = self.config.checkpoint or default_checkpoint(handle, self.config.topic)
        from tablestore.spark.s3a import is_s3, jvm_has_s3a

        if is_s3(self.checkpoint) and not jvm_has_s3a(self.spark):
            raise IngestError(f"checkpoint {self.checkpoint}: this Spark session has no S3A file system (hadoop-aws, "
                              "which tablestore.spark.session adds for an S3 warehouse when mvn can fetch it: "
                              "docs/operations.md); give --checkpoint a path every node of the job reaches")
        self._samples = logstore.edge_records(self._properties(), self.config.topic)
        while True:
            self.state = self.progress_state(State.RUN)
            query = self._start(handle)
            failure = self._watch(query, started)
            if failure is None:
                self.state = self.progress_state(State.DONE)
                self._report(started)
                return self.progress
            marker, _ = decoder_error(failure)
            barrier = barrier_of(failure) if marker == TRUNCATE else None
            if barrier is not None and handle.options.get(INGEST_TRUNCATE) == "apply":
                self.state = self.progress_state(State.TRUNCATE)
                deleted = apply_truncate(handle, self.config.topic, barrier)
                self.progress.truncates += 1
                log.info("ingest %s: TRUNCATE at topic %s partition %s offset %s: %s rows deleted", handle.identifier,
                         barrier.topic, barrier.partition, barrier.offset, deleted)
                continue
            if marker != SCHEMA_CHANGE:
                raise IngestError(stop_message(failure)) from None
            self.state = self.progress_state(State.EVOLVE)
            handle, change = evolve(ref, handle, failure, self.config.format, self._properties(), self._samples)
            self.progress.schema_changes.append(change)

    def progress_state(self, state: State) -> State:
        self.progress.state = state.value
        return state

    def _start(self, handle: "CatalogTable") -> "StreamingQuery":
        c = self.config
        raw = kafka_stream(self.spark, topic=c.topic, bootstrap_servers=c.bootstrap_servers,
                           starting_offsets=c.starting_offsets, kafka_options=c.kafka_options,
                           max_offsets_per_trigger=c.max_offsets_per_trigger)
        known = known_schemas(handle, c.format, self._samples)
        spec = decode_spec(handle, c.format, c.bad_records, known=known, before_images=False,
                           barrier=read_barrier(handle, c.topic), source_table=self.source_table)
        decoded = changes(raw, spec)
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
            p.batches += 1
            metrics = observed(progress)
            p.rows += metrics.get("rows", 0)
            bad = metrics.get("bad", 0) if self.config.bad_records == "skip" else 0
            p.bad_records += bad
            p.events += rows - bad   # records read but the bad ones skipped
            p.events_per_s = float(progress.get("processedRowsPerSecond") or 0.0)
            p.lag = lag(progress)
            if rows:
                self._commit_latency(query, batch, metrics.get("max_ts_ms"), end_offsets(progress))
        if self.on_progress is not None:
            self.on_progress(p)

    def _commit_latency(self, query: "StreamingQuery", batch: int, max_ts_ms: int | None,
                        ends: dict[int, int]) -> None:
        """The snapshot of micro-batch `batch`: counted, and how long after the batch's start (and after its newest
        event) it was committed; then the job's report in the table (tablestore.ingest_report)."""
        store = catalog.Catalog(self.config.warehouse).get_table(self.config.table).store
        self._committed(query, batch, max_ts_ms, ends, store)
        if self._reporter is None:
            self._reporter = IngestReporter(store, INGEST_JOB)
        p = self.progress
        self._reporter.report(p.events, event_to_commit_s=p.event_to_commit_s, last_commit_s=p.last_commit_s,
                              lag=p.lag)

    def _committed(self, query: "StreamingQuery", batch: int, max_ts_ms: int | None, ends: dict[int, int],
                   store: "FileStore") -> None:
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

def _kafka_properties(config: IngestConfig) -> dict[str, str]:
    """The Spark Kafka source's `kafka.*` options as client properties (security settings and the like)."""
    return {k[len("kafka."):]: v for k, v in config.kafka_options.items() if k.startswith("kafka.")}


