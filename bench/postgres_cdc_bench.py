"""A real PostgreSQL at the source: Debezium's PostgreSQL connector in a real Kafka Connect worker, the project's
broker, and `tablestore ingest` (local[2]) keeping a managed table of an `orders` table (id bigint primary key,
customer_id int, status text, amount numeric(10,2), note text, tx bigint, updated_at timestamptz).

    python bench/postgres_cdc_bench.py [--rate 2000 --seconds 60 --clients 4] [--snapshot-rows 1000000]
                                       [--batch 200000] [--partitions 2] [--buckets 2] [--debezium KEY=VALUE]
                                       [--skip latency|snapshot]

1. latency: the job runs with a 1 s trigger (its first micro-batch, the snapshot of 10,000 rows, committed) before
   --clients connections play --rate transactions/s for --seconds: each one statement in autocommit (its own
   transaction, committed before the server answers), 80% an UPDATE of a random existing row, 20% an INSERT, each
   writing its own number into `tx`. Per transaction: from its commit (the client's wall time as the statement
   returns) to the commit of the table's snapshot that holds its change (its record's offset, found by `tx`, against
   the offsets each micro-batch read up to): p50, p99 of all and of the second half (steady state). Target: p99 <=
   3 s. Beside it Debezium's own latency, the floor: from the commit to the record's Kafka timestamp (CreateTime,
   stamped by the Connect worker's producer as it sends; Debezium's defaults, so its poll.interval.ms of 500 ms,
   unless --debezium sets them). The achieved rate is measured and printed.
2. snapshot: --snapshot-rows rows in Postgres (INSERT ... SELECT generate_series), then a connector registered:
   (a) Debezium's snapshot rate (rows/s from the registration to the Kafka timestamp of the last `op: r` record);
   (b) the ingest job's rate over that topic with Trigger.AvailableNow, micro-batches of --batch (rows/s from its
   start to its end; a warm-up pass over a copy of 5,000 of the records first); (c) end to end, a second connector
   with a fresh snapshot and the job (1 s trigger, micro-batches of --batch) started with it: from the registration
   to the commit of the snapshot holding the last `op: r` record. During each snapshot and after it, a few hundred
   UPDATEs, DELETEs and INSERTs; at the end the managed tables (also the latency part's) must equal `SELECT *` of
   the table in Postgres, else the bench exits non-zero.
Postgres (port 15432 + 90) and the Connect worker (port 18083 + 90) are the bench's own, in run directories under
/tmp, started and stopped by it; the broker is reused if it runs (TABLESTORE_KAFKA_PORT or 19092), else started and
stopped. A consumer tails each snapshot's topic to see its end (it costs some CPU). Prints a table and writes
bench/out/postgres_cdc_bench.json. Figures depend on the machine's load: take them on a quiet machine.
"""
from __future__ import annotations

import argparse
import io
import json
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from logstore import broker  # noqa: E402
from logstore.kafka import KafkaAdmin, consumer_config  # noqa: E402
from tablestore.cdc import connect, postgres  # noqa: E402
from tablestore.spark.ingest import IngestConfig, IngestJob  # noqa: E402
from tablestore.spark.ingest_progress import end_offsets, event_latencies  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
PG_PORT = postgres.DEFAULT_PORT + 90
CONNECT_PORT = connect.DEFAULT_PORT + 90
DB = "bench"
LATENCY_ROWS = 10_000
UPDATE_SHARE = 0.8
MARKER = 10**12
DDL = ("CREATE TABLE {t} (id bigint PRIMARY KEY, customer_id int, status text, amount numeric(10,2), note text, "
       "tx bigint, updated_at timestamptz)")
FILL = ("INSERT INTO {t} SELECT g, g % 5000, (ARRAY['new', 'paid', 'shipped'])[g % 3 + 1], (g % 100000) / 100.0, "
        "'order ' || g || ' ' || md5(g::text), NULL, '2024-01-01'::timestamptz + g * interval '1 second' "
        "FROM generate_series(1, {n}) g")
UPDATE = "UPDATE {t} SET status = %s, amount = %s, note = %s, tx = %s, updated_at = now() WHERE id = %s"
INSERT = "INSERT INTO {t} VALUES (%s, %s, 'new', %s, %s, %s, now())"
ORACLE = ("COPY (SELECT id, customer_id, status, amount::text, note, tx, "
          "(extract(epoch FROM updated_at) * 1000000)::bigint FROM {t} ORDER BY id) TO STDOUT (FORMAT csv)")
COLUMNS = ("id", "customer_id", "status", "amount", "note", "tx", "updated_at")
TX = re.compile(rb'"after":\{[^}]*?"tx":(\d+)')


class Source:
    """The bench's own Postgres and Connect worker (started here, stopped by `close`), one database, its
    connectors and the topics made for them."""

    def __init__(self, bootstrap: str, debezium: dict[str, str]) -> None:
        self.bootstrap, self.debezium = bootstrap, debezium
        self.dirs = [Path(tempfile.mkdtemp(prefix="pgcdc-bench-pg-", dir="/tmp")),
                     Path(tempfile.mkdtemp(prefix="pgcdc-bench-connect-", dir="/tmp"))]
        self.topics: list[str] = []
        self.connectors: list[str] = []
        self.worker: connect.ConnectWorker | None = None
        self.conn: Any = None

    def start(self) -> None:
        import psycopg

        self.pg = postgres.start(self.dirs[0], port=PG_PORT)
        postgres.create_database(self.pg, DB)
        self.conn = psycopg.connect(self.pg.dsn(DB), autocommit=True)
        self.worker = connect.start(self.dirs[1], port=CONNECT_PORT, bootstrap_servers=self.bootstrap)

    def sql(self, statement: str, params: Any = None) -> int:
        return self.conn.execute(statement, params).rowcount   # type: ignore[arg-type]

    def topic(self, table: str, partitions: int) -> tuple[str, str]:
        """A connector name (its topic prefix) and its table's topic, made beforehand with `partitions`."""
        prefix = f"b{uuid.uuid4().hex[:8]}"
        topic = f"{prefix}.public.{table}"
        KafkaAdmin({"bootstrap.servers": self.bootstrap}).create_topic(topic, partitions, None)
        self.topics.append(topic)
        return prefix, topic

    def capture(self, prefix: str, table: str) -> None:
        assert self.worker is not None
        connect.register_postgres(self.worker.url, prefix, host="127.0.0.1", port=self.pg.port, user="postgres",
                                  password=None, dbname=DB, topic_prefix=prefix, tables=[f"public.{table}"],
                                  config={"skipped.operations": "none", **self.debezium}, wait_s=120)
        self.connectors.append(prefix)

    def release(self, prefix: str) -> None:
        """Delete the connector and drop its replication slot (which would keep WAL)."""
        assert self.worker is not None
        connect.delete_connector(self.worker.url, prefix)
        self.connectors.remove(prefix)
        slot = connect.slot_name_for(prefix)
        _wait(lambda: self.sql("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE "
                               "slot_name = %s AND NOT active", (slot,)), 30, f"slot {slot} to be released")

    def keep_log_topic(self, warehouse: Path, table: str) -> None:
        """The managed table's log topic, to delete with the others."""
        self.topics.append(tablestore.Catalog(str(warehouse)).get_table(f"{DB}.{table}").options["log.topic"])

    def close(self) -> None:
        try:
            for prefix in list(self.connectors):
                self.release(prefix)
            if self.conn is not None:
                self.conn.close()
        finally:
            connect.stop(self.dirs[1])
            postgres.stop(self.dirs[0])
            for d in self.dirs:
                shutil.rmtree(d, ignore_errors=True)
            admin = KafkaAdmin({"bootstrap.servers": self.bootstrap})
            internal = [] if self.worker is None else [f"{self.worker.group_id}-{s}" for s in
                                                       ("configs", "offsets", "status")]
            for topic in self.topics + internal:
                admin.delete_topic(topic)


def _wait(condition: Callable[[], Any], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def _ends(bootstrap: str, topic: str) -> dict[int, int]:
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    return admin.list_offsets(topic, admin.partitions(topic) or 1, timestamp_ms=None, read_committed=False)


def _scan(bootstrap: str, topic: str, each: Callable[[Any], None], limit: int | None = None) -> None:
    """`each(message)` for every record of `topic` up to its end offsets as they are now (or the first `limit`)."""
    from confluent_kafka import Consumer, TopicPartition

    ends = {p: o for p, o in _ends(bootstrap, topic).items() if o > 0}
    consumer = Consumer(consumer_config({"bootstrap.servers": bootstrap}, read_committed=False))
    consumer.assign([TopicPartition(topic, p, 0) for p in ends])
    seen = 0
    try:
        while ends and (limit is None or seen < limit):
            for m in consumer.consume(5000, 1.0):
                if m.error() is None:
                    each(m)
                    seen += 1
                    p, offset = int(m.partition() or 0), int(m.offset() or 0)
                    if offset + 1 >= ends.get(p, 0):
                        ends.pop(p, None)
    finally:
        consumer.close()


class Tail(threading.Thread):
    """Follows a Debezium topic from its start: its snapshot's records (`op: r`: how many, their Kafka timestamps,
    the end of them per partition, whether the one marked `snapshot: last` came) and the ids of the other changes."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.rows = 0
        self.first_ms: int | None = None
        self.last_ms = 0
        self.r_ends: dict[int, int] = {}
        self.seen: dict[int, int] = {}
        self.last = threading.Event()
        self.ids: set[int] = set()
        self._stopping = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(consumer_config({"bootstrap.servers": self.bootstrap}, read_committed=False))
        consumer.assign([TopicPartition(self.topic, p, 0) for p in _ends(self.bootstrap, self.topic)])
        while not self._stopping.is_set():
            for m in consumer.consume(5000, 0.2):
                value = m.value()
                if m.error() is not None:
                    continue
                p, offset = int(m.partition() or 0), int(m.offset() or 0)
                self.seen[p] = offset + 1
                if value is None:
                    continue
                if b'"op":"r"' in value:
                    ts = m.timestamp()[1]
                    self.rows += 1
                    self.first_ms = ts if self.first_ms is None else min(self.first_ms, ts)
                    self.last_ms = max(self.last_ms, ts)
                    self.r_ends[p] = offset + 1
                    if b'"snapshot":"last"' in value:
                        self.last.set()
                else:
                    after = json.loads(value)["payload"]["after"]
                    if after is not None:
                        self.ids.add(int(after["id"]))
        consumer.close()

    def settle(self, timeout_s: float) -> None:
        """Until the snapshot's last record is seen and every record produced by then has been read."""
        _wait(self.last.is_set, timeout_s, f"the last snapshot record in {self.topic}")
        ends = _ends(self.bootstrap, self.topic)
        _wait(lambda: all(self.seen.get(p, 0) >= o for p, o in ends.items() if o), 60, "the tail to catch up")

    def stop(self) -> None:
        self._stopping.set()
        self.join(30)


def _job(spark: Any, warehouse: Path, table: str, topic: str, bootstrap: str, args: argparse.Namespace,
         **kwargs: Any) -> IngestJob:
    return IngestJob(spark, IngestConfig(
        table=f"{DB}.{table}", topic=topic, bootstrap_servers=bootstrap, warehouse=str(warehouse), create=True,
        table_options={"bucket": str(args.buckets)}, checkpoint=str(warehouse / f"ck-{topic}"),
        catalog_options={"log.properties.bootstrap.servers": bootstrap}, **kwargs))


class Running:
    """An ingest job in a thread of its own (its failure kept for the bench to raise)."""

    def __init__(self, job: IngestJob) -> None:
        self.job = job
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.job.run()
        except BaseException as e:  # noqa: BLE001 - raised by `check`
            self.failure = e

    def ok(self) -> bool:
        """True, unless the job failed: then the bench stops with its error."""
        if self.failure is not None:
            raise SystemExit(f"the ingest job failed: {self.failure}")
        return True

    def read_up_to(self, ends: dict[int, int]) -> bool:
        """Whether a micro-batch done (committed) has read each partition up to `ends`."""
        self.ok()
        query, done = self.job._query, dict[int, int]()   # noqa: SLF001 - the query's progress is the bench's measure
        for progress in [] if query is None else query.recentProgress or []:
            for p, o in end_offsets(progress).items():
                done[p] = max(done.get(p, 0), o)
        return all(done.get(p, 0) >= o for p, o in ends.items() if o)

    def batch_seconds(self) -> list[float]:
        """How long each recent micro-batch that read records took (its trigger's execution)."""
        query = self.job._query   # noqa: SLF001
        return [p["durationMs"].get("triggerExecution", 0) / 1000 for p in
                ([] if query is None else query.recentProgress or []) if p.get("numInputRows")]

    def stop(self) -> None:
        self.job.request_stop()
        self.thread.join(120)


def _same_as_postgres(source: Source, table: str, warehouse: Path) -> tuple[bool, str]:
    """The managed table equals `SELECT *` of the Postgres table (numeric as its text, timestamptz as epoch us)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyarrow import csv

    with source.conn.cursor().copy(ORACLE.format(t=table)) as copy:   # type: ignore[arg-type]
        data = b"".join(bytes(chunk) for chunk in copy)
    types = [pa.int64(), pa.int32(), pa.string(), pa.string(), pa.string(), pa.int64(), pa.int64()]
    want = csv.read_csv(io.BytesIO(data), read_options=csv.ReadOptions(column_names=list(COLUMNS)),
                        convert_options=csv.ConvertOptions(column_types=dict(zip(COLUMNS, types)),
                                                           strings_can_be_null=True,
                                                           quoted_strings_can_be_null=False))
    got = tablestore.Catalog(str(warehouse)).get_table(f"{DB}.{table}").read().sort_by("id")
    got = pa.table([pc.cast(got[c], t) if c != "updated_at" else pc.cast(pc.cast(got[c], pa.timestamp("us")),
                                                                         pa.int64())
                    for c, t in zip(COLUMNS, types)], names=list(COLUMNS))
    if got.equals(want):
        return True, f"{want.num_rows:,} rows equal"
    if got.num_rows != want.num_rows:
        return False, f"{got.num_rows:,} rows in the managed table, {want.num_rows:,} in Postgres"
    for c in COLUMNS:
        differs = pc.invert(pc.fill_null(pc.equal(got[c], want[c]), False))
        if pc.any(differs).as_py():
            i = pc.index(differs, True).as_py()
            return False, f"column {c} differs first at id {want['id'][i]}: {got[c][i]} != {want[c][i]}"
    return False, "the tables differ (nulls)"


def _summary(lat: list[float]) -> dict[str, Any]:
    arr = np.array(lat) if lat else np.array([float("nan")])
    return {"measured": len(lat), "p50_s": float(np.percentile(arr, 50)), "p99_s": float(np.percentile(arr, 99)),
            "max_s": float(arr.max())}


# -- 1. latency ---------------------------------------------------------------------------------------------------
def _client(source: Source, table: str, k: int, args: argparse.Namespace, start: float,
            out: list[tuple[int, float]]) -> None:
    """Client `k` of `--clients`: its share of the rate, each transaction due at its time (late ones at once)."""
    import psycopg

    rng = random.Random(k)
    every = args.clients / args.rate
    update, insert = UPDATE.format(t=table), INSERT.format(t=table)
    with psycopg.connect(source.pg.dsn(DB), autocommit=True) as conn:
        for i in range(int(args.rate * args.seconds / args.clients)):
            pause = start + (i + k / args.clients) * every - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            tx = i * args.clients + k + 1
            amount = Decimal(rng.randrange(100, 1_000_000)) / 100
            note = f"tx {tx} by client {k}: " + "x" * rng.randrange(10, 60)
            if rng.random() < UPDATE_SHARE:
                conn.execute(update, (rng.choice(("paid", "shipped", "delivered")), amount, note, tx,
                                      rng.randrange(1, LATENCY_ROWS + 1)))
            else:
                conn.execute(insert, (LATENCY_ROWS + tx, rng.randrange(5000), amount, note, tx))
            out.append((tx, time.time()))


def latency(spark: Any, source: Source, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    table = "orders_latency"
    source.sql(DDL.format(t=table))
    source.sql(FILL.format(t=table, n=LATENCY_ROWS))
    prefix, topic = source.topic(table, args.partitions)
    source.capture(prefix, table)
    _wait(lambda: sum(_ends(source.bootstrap, topic).values()) >= LATENCY_ROWS, 300, "the snapshot in Kafka")
    wh = work / "wh-latency"
    job = Running(_job(spark, wh, table, topic, source.bootstrap, args, trigger_interval="1 second"))
    _wait(lambda: job.ok() and job.job.commits, 600, "the job's first micro-batch")
    print(f"latency: the job's first micro-batch committed; playing {args.rate:,} transactions/s for "
          f"{args.seconds} s over {args.clients} connections", flush=True)
    done: list[list[tuple[int, float]]] = [[] for _ in range(args.clients)]
    start = time.monotonic() + 0.1
    clients = [threading.Thread(target=_client, args=(source, table, k, args, start, done[k]), daemon=True)
               for k in range(args.clients)]
    for c in clients:
        c.start()
    for c in clients:
        c.join()
    commits = sorted((t for d in done for t in d), key=lambda t: t[1])
    if len(commits) < args.clients * int(args.rate * args.seconds / args.clients):
        raise SystemExit(f"a client stopped after {len(commits):,} transactions in all (its error is above)")
    played_s = commits[-1][1] - commits[0][1] if len(commits) > 1 else float("nan")
    _wait(lambda: sum(_ends(source.bootstrap, topic).values()) - LATENCY_ROWS >= len(commits), 300,
          "every transaction in Kafka")
    ends = _ends(source.bootstrap, topic)
    _wait(lambda: job.read_up_to(ends), 600, "the job to read every transaction")
    job.stop()
    batches = job.batch_seconds()
    records: dict[int, tuple[int, int, int]] = {}

    def found(m: Any) -> None:
        hit = TX.search(m.value() or b"")
        if hit:
            records[int(hit.group(1))] = (m.partition(), m.offset(), m.timestamp()[1])

    _scan(source.bootstrap, topic, found)
    source.release(prefix)
    matched = [(tx, made, records[tx]) for tx, made in commits if tx in records]
    out: dict[str, Any] = {"transactions": len(commits), "records_found": len(matched), "played_s": played_s,
                           "achieved_rate": len(commits) / played_s, "clients": args.clients,
                           "records_in_kafka": sum(ends.values()) - LATENCY_ROWS, "batches": len(batches),
                           "batch_p50_s": float(np.median(batches)), "batch_max_s": max(batches)}
    for part, rows in (("all", matched), ("steady", matched[len(matched) // 2:])):
        out.setdefault("ingest", {})[part] = _summary(
            event_latencies(job.job.commits, [(p, off, made) for _, made, (p, off, _) in rows]))
        out.setdefault("debezium", {})[part] = _summary([ts / 1000 - made for _, made, (_, _, ts) in rows])
    out["equal"], out["check"] = _same_as_postgres(source, table, wh)
    source.keep_log_topic(wh, table)
    return out


# -- 2. snapshot --------------------------------------------------------------------------------------------------
class Writer:
    """UPDATE, DELETE and INSERT rounds on the snapshot's table (a thread's own connection), ids from `next_id`."""

    def __init__(self, source: Source, table: str, seed: int, rows: int, next_id: list[int]) -> None:
        import psycopg

        self.conn = psycopg.connect(source.pg.dsn(DB), autocommit=True)
        self.table, self.rng, self.rows, self.next_id = table, random.Random(seed), rows, next_id
        self.writes = 0

    def rounds(self, n: int, pause_s: float = 0.0, until: threading.Event | None = None) -> None:
        t = self.table
        for _ in range(n):
            if until is not None and until.is_set():
                break
            self.next_id[0] += 1
            self.conn.execute(f"UPDATE {t} SET status = 'changed', tx = %s, updated_at = now() WHERE id = %s",
                              (self.next_id[0], self.rng.randrange(1, self.rows + 1)))
            self.conn.execute(f"DELETE FROM {t} WHERE id = %s", (self.rng.randrange(1, self.rows + 1),))
            self.conn.execute(INSERT.format(t=t), (self.next_id[0], 7, Decimal("1.50"), "inserted", self.next_id[0]))
            self.writes += 3
            time.sleep(pause_s)

    def marker(self, marker: int) -> None:
        self.conn.execute(INSERT.format(t=self.table), (marker, 0, Decimal("0.01"), "marker", marker))
        self.writes += 1


def _snapshot_run(spark: Any, source: Source, args: argparse.Namespace, table: str, wh: Path, marker: int,
                  next_id: list[int], with_job: bool) -> tuple[dict[str, Any], str, Running | None]:
    """A connector's snapshot of `table` (the job started with it if `with_job`), writes during and after it."""
    prefix, topic = source.topic(table, args.partitions)
    tail = Tail(source.bootstrap, topic)
    tail.start()
    job = Running(_job(spark, wh, table, topic, source.bootstrap, args, trigger_interval="1 second",
                       max_offsets_per_trigger=args.batch)) if with_job else None
    registered = time.time()
    source.capture(prefix, table)
    writer = Writer(source, table, marker, args.snapshot_rows, next_id)
    _wait(lambda: tail.first_ms is not None, 600, "the first snapshot record")
    during = threading.Thread(target=writer.rounds, args=(100, 0.05, tail.last), daemon=True)
    during.start()
    tail.settle(24 * 3600)
    during.join()
    out: dict[str, Any] = {"snapshot_records": tail.rows, "debezium_first_record_s": (tail.first_ms or 0) / 1000 - registered,
                           "debezium_s": tail.last_ms / 1000 - registered, "writes_during": writer.writes}
    out["debezium_rows_per_s"] = tail.rows / out["debezium_s"]
    if job is not None:
        def covering() -> list[int]:
            return [ms for ends, ms in job.job.commits if all(ends.get(p, 0) >= o for p, o in tail.r_ends.items())]

        _wait(lambda: job.ok() and covering(), 24 * 3600, "the job to commit the snapshot")
        out["end_to_end_s"] = covering()[0] / 1000 - registered
        out["end_to_end_rows_per_s"] = tail.rows / out["end_to_end_s"]
        first = job.job.commits[0][1] / 1000 - registered
        out["job_first_commit_s"] = first
    writer.rounds(100)
    writer.marker(marker)
    out["writes"] = writer.writes
    writer.conn.close()
    _wait(lambda: marker in tail.ids, 600, "the writes after the snapshot in Kafka")
    tail.stop()
    source.release(prefix)
    return out, topic, job


def snapshot(spark: Any, source: Source, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    table = "orders_snapshot"
    source.sql(DDL.format(t=table))
    t = time.perf_counter()
    source.sql(FILL.format(t=table, n=args.snapshot_rows))
    source.sql(f"VACUUM ANALYZE {table}")
    out: dict[str, Any] = {"rows": args.snapshot_rows, "fill_s": time.perf_counter() - t}
    print(f"snapshot: {args.snapshot_rows:,} rows in Postgres in {out['fill_s']:.1f} s", flush=True)
    next_id = [args.snapshot_rows + 1_000]
    # (a) Debezium alone, then (b) the job over the topic with Trigger.AvailableNow
    wh = work / "wh-available-now"
    out["debezium"], topic, _ = _snapshot_run(spark, source, args, table, wh, MARKER + 1, next_id, with_job=False)
    print(f"snapshot: Debezium alone: {out['debezium']['snapshot_records']:,} records in "
          f"{out['debezium']['debezium_s']:.1f} s", flush=True)
    warm: list[tuple[bytes | None, bytes | None]] = []
    _scan(source.bootstrap, topic, lambda m: warm.append((m.key(), m.value())), limit=5000)
    _, warm_topic = source.topic("warm", args.partitions)
    import logstore

    logstore.produce_raw({"bootstrap.servers": source.bootstrap}, warm_topic, warm)
    _job(spark, work / "wh-warm", "warm", warm_topic, source.bootstrap, args, available_now=True,
         max_offsets_per_trigger=args.batch).run()
    job = _job(spark, wh, table, topic, source.bootstrap, args, available_now=True, max_offsets_per_trigger=args.batch)
    t = time.perf_counter()
    progress = job.run()
    took = time.perf_counter() - t
    out["available_now"] = {"records": progress.events, "s": took, "records_per_s": progress.events / took,
                            "snapshots": progress.snapshots}
    out["available_now"]["equal"], out["available_now"]["check"] = _same_as_postgres(source, table, wh)
    source.keep_log_topic(wh, table)
    source.keep_log_topic(work / "wh-warm", "warm")
    # (c) end to end: a fresh snapshot by a second connector, the job running from its registration on
    wh = work / "wh-end-to-end"
    out["end_to_end"], topic, running = _snapshot_run(spark, source, args, table, wh, MARKER + 2, next_id,
                                                      with_job=True)
    assert running is not None
    ends = _ends(source.bootstrap, topic)
    _wait(lambda: running.read_up_to(ends), 600, "the job to read the writes after the snapshot")
    running.stop()
    running.ok()
    out["end_to_end"]["equal"], out["end_to_end"]["check"] = _same_as_postgres(source, table, wh)
    source.keep_log_topic(wh, table)
    return out


def _report(results: dict[str, Any], args: argparse.Namespace) -> None:
    """The figures of the parts done so far, and the checks."""
    rows: list[tuple[str, str, str]] = []
    if "latency" in results:
        r = results["latency"]
        rows.append(("achieved rate", f"{r['achieved_rate']:,.0f} tx/s over {r['played_s']:.1f} s "
                     f"({r['transactions']:,} tx, {r['clients']} connections; asked {args.rate:,})", ""))
        rows.append(("micro-batches that read records: p50 / max", f"{r['batch_p50_s']:.2f} / {r['batch_max_s']:.2f}"
                     f" s ({r['batches']} of them, the first's included)", ""))
        for part in ("all", "steady"):
            i, d = r["ingest"][part], r["debezium"][part]
            rows.append((f"commit -> readable, {part}: p50 / p99", f"{i['p50_s']:.2f} / {i['p99_s']:.2f} s "
                         f"({i['measured']:,} tx)", "p99 <= 3 s: " + ("met" if i["p99_s"] <= 3 else "NOT met")))
            rows.append((f"commit -> Kafka (Debezium), {part}: p50 / p99",
                         f"{d['p50_s']:.2f} / {d['p99_s']:.2f} s", "the floor"))
    if "snapshot" in results:
        r = results["snapshot"]
        a, n, e = r["debezium"], r["available_now"], r["end_to_end"]
        rows += [("Debezium's snapshot alone", f"{a['debezium_rows_per_s']:,.0f} rows/s ({a['snapshot_records']:,} "
                  f"in {a['debezium_s']:.1f} s; first record after {a['debezium_first_record_s']:.1f} s)", ""),
                 ("ingest, available-now over it", f"{n['records_per_s']:,.0f} records/s ({n['records']:,} in "
                  f"{n['s']:.1f} s, {n['snapshots']} snapshots)", ""),
                 ("end to end, job running during the snapshot", f"{e['end_to_end_rows_per_s']:,.0f} rows/s "
                  f"({e['end_to_end_s']:.1f} s; Debezium's part {e['debezium_s']:.1f} s; the job's first commit "
                  f"after {e['job_first_commit_s']:.1f} s)", "")]
    for name, value, target in rows:
        print(f"  {name:<48} {value:<74} {target}")
    for part, r in results.get("checks", {}).items():
        print(f"  check {part}: {'OK' if r[0] else 'FAILED'}: {r[1]}")
    sys.stdout.flush()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rate", type=int, default=2_000, help="transactions/s of the latency part")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--clients", type=int, default=4, help="connections playing the rate")
    parser.add_argument("--snapshot-rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=200_000, help="records per micro-batch of the snapshot part")
    parser.add_argument("--partitions", type=int, default=2, help="of each Debezium topic")
    parser.add_argument("--buckets", type=int, default=2, help="of each managed table")
    parser.add_argument("--debezium", action="append", default=[], metavar="KEY=VALUE",
                        help="a setting of each connector (e.g. poll.interval.ms=100; Debezium's defaults otherwise)")
    parser.add_argument("--skip", action="append", default=[], choices=("latency", "snapshot"))
    args = parser.parse_args()
    ours = broker.status() is None
    bootstrap = broker.start() if ours else broker.status()
    assert bootstrap is not None
    work = Path(tempfile.mkdtemp(prefix="pgcdc-bench-"))
    results: dict[str, Any] = {"args": vars(args), "checks": {}}
    source = None
    spark = None
    try:
        source = Source(bootstrap, dict(kv.split("=", 1) for kv in args.debezium))
        source.start()
        spark = tablestore.spark.session(str(work / "wh"), master="local[2]", kafka=True,
                                         **{"spark.sql.shuffle.partitions": "2"})
        spark.sparkContext.setLogLevel("ERROR")
        if "latency" not in args.skip:
            r = results["latency"] = latency(spark, source, args, work)
            results["checks"]["latency"] = (r["equal"], r["check"])
            _report(results, args)
        if "snapshot" not in args.skip:
            r = results["snapshot"] = snapshot(spark, source, args, work)
            results["checks"]["available-now"] = (r["available_now"]["equal"], r["available_now"]["check"])
            results["checks"]["end-to-end"] = (r["end_to_end"]["equal"], r["end_to_end"]["check"])
    finally:
        if spark is not None:
            spark.stop()
        if source is not None:
            source.close()
        if ours:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
        OUT.mkdir(exist_ok=True)
        (OUT / "postgres_cdc_bench.json").write_text(json.dumps(results, indent=2))
        print(f"wrote {OUT / 'postgres_cdc_bench.json'}")
    _report(results, args)
    if not all(ok for ok, _ in results["checks"].values()):
        raise SystemExit("a managed table differs from Postgres")


if __name__ == "__main__":
    main()
