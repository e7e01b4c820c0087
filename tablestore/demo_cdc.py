"""`tablestore demo`: the job tablestore exists for, on the embedded defaults (a local warehouse, the project's own
Kafka broker, local Spark) or on services of your own (`--warehouse s3://...`, `--bootstrap-servers`, `--master
spark://...`: docker-compose.yml runs it so), checked end to end.

1. a generated "shop" database (tablestore.cdc.shop) emits Debezium JSON change events for its orders into a Kafka
   topic: inserts, updates, deletes, primary-key changes, and half way an ALTER TABLE that adds a column;
2. `tablestore ingest`'s job (tablestore.spark.ingest) streams them into the managed table `shop.orders`, creating
   it from the first event and adding the new column when it appears, without a restart;
3. a second streaming query reads the table's own changes (`readStream.format("managed")`: -U/+U, -D with the old
   row) and keeps revenue per customer from them, as a downstream consumer would;
4. compaction runs meanwhile, beside the writer (optimistic commits: one of them retries);
5. at the end the table and the revenue are checked against the generator's ground truth, then compacted fully.
It shows progress while it runs and prints a report: events, rows, snapshots, files before and after compaction,
and the end-to-end latency (p50/p99) from each event's time to its row being readable in the table and to its change
reaching the downstream query. Exit status 1 when anything disagrees.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np

import logstore
import tablestore
from filestore import CommitConflictError, CommitRetriesExhaustedError
from logstore import broker
from tablestore.cdc.shop import TOPIC, ShopOrders

TABLE = "shop.orders"


@dataclass
class DemoState:
    produced: int = 0
    downstream_changes: int = 0
    revenue: dict[int, Decimal] = field(default_factory=dict)
    downstream_lag_s: list[float] = field(default_factory=list)
    compactions: int = 0
    compaction_conflicts: int = 0
    done_producing: bool = False
    errors: list[str] = field(default_factory=list)


def _produce(shop: ShopOrders, producer: logstore.RawProducer, state: DemoState, rate: int, seconds: float,
             stop: threading.Event) -> None:
    """Play the shop's change stream at `rate` events/s, until `seconds` have passed or `stop` is set (the demo
    failed); the source's ALTER TABLE half way."""
    start = time.monotonic()
    made = 0
    try:
        while (elapsed := time.monotonic() - start) < seconds and not stop.is_set():
            if not shop.coupon and elapsed >= seconds / 2:
                shop.add_coupon()
            due = int(elapsed * rate)
            for key, value in shop.events(max(0, due - made)):
                producer.produce(key, value, tag=time.time())
            made = max(made, due)
            state.produced = shop.made
            time.sleep(0.05)
        producer.flush()
    except Exception as e:  # noqa: BLE001 - reported at the end, the demo fails
        state.errors.append(f"producer: {e}")
    state.done_producing = True


def _compact_now_and_then(table: tablestore.Table, state: DemoState, stop: threading.Event) -> None:
    while not stop.wait(8):
        try:
            table.compact()
            state.compactions += 1
        except (CommitConflictError, CommitRetriesExhaustedError):
            state.compaction_conflicts += 1   # the writer won the race: nothing lost, the next round compacts
        except tablestore.TableStoreError as e:
            state.errors.append(f"compaction: {e}")


def _downstream(spark: Any, warehouse: str, checkpoint: str, state: DemoState) -> Any:
    """Revenue per customer from the table's changes: +I/+U add the row's amount, -U/-D take the old row's away."""
    from pyspark.sql import functions as F

    changes = spark.readStream.format("managed").option("warehouse", warehouse).load(TABLE)

    def apply(batch: Any, batch_id: int) -> None:
        signed = F.when(F.col("_row_kind").isin("+I", "+U"), F.col("amount")).otherwise(-F.col("amount"))
        lag = (F.unix_micros(F.current_timestamp()) - F.unix_micros(F.col("updated_at").cast("timestamp"))) / 1e6
        rows = batch.select(F.col("customer_id"), signed.alias("signed"), lag.alias("lag")).collect()
        for r in rows:
            state.revenue[r["customer_id"]] = state.revenue.get(r["customer_id"], Decimal(0)) + r["signed"]
            state.downstream_lag_s.append(float(r["lag"]))
        state.downstream_changes += len(rows)

    return (changes.writeStream.foreachBatch(apply).option("checkpointLocation", checkpoint)
            .trigger(processingTime="1 second").start())


def _table_latencies(job: Any, producer: logstore.RawProducer) -> list[float]:
    """Per event: the commit time of the snapshot of the micro-batch that read it, minus when it was made."""
    return job.event_latencies([(p, o, float(t)) for p, o, t in producer.delivered])


def _pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q)) if values else float("nan")


def _rows(state: DemoState, job: Any) -> list[tuple[str, str]]:
    p = job.progress
    return [
        ("source events produced", f"{state.produced:,}" + (" (done)" if state.done_producing else "")),
        ("ingest", f"{p.events:,} events, {p.events_per_s:,.0f}/s, Kafka lag {p.lag if p.lag is not None else '?'}"
                   f", {p.snapshots} snapshots, last commit {p.last_commit_s or 0:.2f} s ({p.state})"),
        ("schema changes", ", ".join(p.schema_changes) or "-"),
        ("downstream", f"{state.downstream_changes:,} changes, {len(state.revenue)} customers"),
        ("compaction", f"{state.compactions} runs, {state.compaction_conflicts} lost a race and retried"),
    ]


def _view(state: DemoState, job: Any, started: float) -> Any:
    from rich.table import Table

    view = Table(title=f"tablestore demo: {TOPIC} -> {TABLE} -> revenue per customer "
                       f"({time.monotonic() - started:.0f} s)", show_header=False)
    for key, value in _rows(state, job):
        view.add_row(key, value)
    return view


class _Status:
    """Progress while the demo runs: rich's live box on a terminal, else (piped: a box redrawn in a file runs into
    the lines after it) a plain line every `PLAIN_EVERY_S`."""

    PLAIN_EVERY_S = 5.0

    def __init__(self, console: Any, state: DemoState, job: Any) -> None:
        self.console, self.state, self.job = console, state, job
        self.started = time.monotonic()
        self.printed = 0.0
        self.live: Any = None

    def __enter__(self) -> "_Status":
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(_view(self.state, self.job, self.started), console=self.console, refresh_per_second=2)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.live is not None:
            self.live.update(_view(self.state, self.job, self.started))
        elif force or now - self.printed >= self.PLAIN_EVERY_S:
            self.printed = now
            line = "; ".join(f"{k}: {v}" for k, v in _rows(self.state, self.job))
            self.console.print(f"[{now - self.started:4.0f} s] {line}", markup=False, soft_wrap=True)


def run_cdc_demo(*, warehouse: str | None = None, rate: int = 2000, seconds: float = 60.0, keys: int = 5000,
                 bootstrap_servers: str | None = None, master: str = "local[2]") -> int:
    """The demo; 0 when the table and the downstream revenue equal the source's truth, else 1.

    `bootstrap_servers`: a Kafka cluster of your own, used as it is; unset, the project's own broker (started for
    the demo and stopped after it unless it was running). `master`: Spark's master URL (`spark://host:7077`)."""
    from rich.console import Console

    import tablestore.spark
    from tablestore.spark.ingest import IngestConfig, IngestJob
    from tablestore.spark.s3a import jvm_has_s3a, to_s3a

    console = Console()
    started_broker = bootstrap_servers is None and broker.status() is None
    bootstrap = bootstrap_servers or broker.status() or broker.start()
    own_warehouse = warehouse is None
    warehouse = warehouse or tempfile.mkdtemp(prefix="tablestore-demo-")
    local_checkpoints: str | None = None
    console.print(f"broker {bootstrap}, warehouse {warehouse}; starting Spark ({master})")
    try:
        if tablestore.Catalog(warehouse).table_exists(TABLE):   # a warehouse of an earlier demo: start afresh
            tablestore.Catalog(warehouse).drop_table(TABLE)
        properties = {"bootstrap.servers": bootstrap}
        logstore.recreate_topic(properties, TOPIC, partitions=2)
        shop = ShopOrders(keys=keys, key_change_ratio=0.01)
        producer = logstore.RawProducer(properties, TOPIC, track=True)
        for key, value in shop.events(50):   # the first events: the table is created from them
            producer.produce(key, value, tag=time.time())
        producer.flush()
        spark = tablestore.spark.session(warehouse, master=master, kafka=True, app_name="tablestore-demo",
                                         **{"spark.sql.shuffle.partitions": "2"})
        spark.sparkContext.setLogLevel("OFF")   # the demo reports its own errors; Spark logs expected ones too
        # the checkpoints live beside the table, in the bucket through Hadoop's S3A (tablestore/spark/s3a.py), unless
        # the session got no S3A (its jars could not be fetched: no mvn): then on the driver's disk. Only the driver
        # writes them (neither query has a stateful operator), so that holds on a cluster too.
        if not _is_local(warehouse) and not jvm_has_s3a(spark):
            local_checkpoints = tempfile.mkdtemp(prefix="tablestore-demo-checkpoints-")
        checkpoints = local_checkpoints or to_s3a(warehouse)
        state = DemoState()
        job = IngestJob(spark, IngestConfig(
            table=TABLE, topic=TOPIC, bootstrap_servers=bootstrap, warehouse=warehouse, create=True,
            checkpoint=f"{local_checkpoints}/ingest" if local_checkpoints else None,   # None: under the table
            table_options={"bucket": "2"}, catalog_options={"log.properties.bootstrap.servers": bootstrap},
            trigger_interval="1 second"))
        ingest = threading.Thread(target=_run_job, args=(job, state), daemon=True)
        ingest.start()
        while not tablestore.Catalog(warehouse).table_exists(TABLE) and ingest.is_alive():
            time.sleep(0.2)
        table = tablestore.Catalog(warehouse).get_table(TABLE)
        down = _downstream(spark, warehouse, f"{checkpoints}/_downstream_checkpoint", state)
        stop = threading.Event()
        produce_args = (shop, producer, state, rate, seconds, stop)
        threads = [threading.Thread(target=_produce, args=produce_args, daemon=True),
                   threading.Thread(target=_compact_now_and_then, args=(table, state, stop), daemon=True)]
        for t in threads:
            t.start()
        expected = shop.revenue_by_customer
        with _Status(console, state, job) as status:
            deadline = None
            while ingest.is_alive() and not state.errors:
                status.update()
                if down.exception() is not None:
                    state.errors.append(f"downstream query: {down.exception()}")
                time.sleep(0.5)
                if state.done_producing:
                    deadline = deadline or time.monotonic() + 120
                    if _caught_up(job, producer, state, expected()) or time.monotonic() > deadline:
                        break
            stop.set()
            job.request_stop()
            ingest.join(120)
            down.stop()
            for t in threads:   # the report reads the shop's state, which the producer changes until it ends
                t.join(60)
            status.update(force=True)
        return _report(console, shop, table, state, job, producer)
    finally:
        if own_warehouse:
            shutil.rmtree(warehouse, ignore_errors=True)
        if local_checkpoints:
            shutil.rmtree(local_checkpoints, ignore_errors=True)
        if started_broker:
            broker.stop()


def _is_local(warehouse: str) -> bool:
    """A path or file:// URL (which Spark's JVM writes checkpoints to), not an object store's URL."""
    return "://" not in warehouse or warehouse.startswith("file:")


def _run_job(job: Any, state: DemoState) -> None:
    try:
        job.run()
    except Exception as e:  # noqa: BLE001 - reported at the end, the demo fails
        state.errors.append(f"ingest: {type(e).__name__}: {e}")


def _caught_up(job: Any, producer: logstore.RawProducer, state: DemoState, expected: dict[int, Decimal]) -> bool:
    ends: dict[int, int] = {}
    for partition, offset, _ in producer.delivered:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    done = job.commits[-1][0] if job.commits else {}
    return all(done.get(p, 0) >= end for p, end in ends.items()) and _same_revenue(state.revenue, expected)


def _same_revenue(got: dict[int, Decimal], expected: dict[int, Decimal]) -> bool:
    return {k: v for k, v in got.items() if v != 0} == {k: v for k, v in expected.items() if v != 0}


def _files(table: tablestore.Table) -> int:
    return int(str(table.describe()["file_count"]))


def _report(console: Any, shop: ShopOrders, table: tablestore.Table, state: DemoState, job: Any,
            producer: logstore.RawProducer) -> int:
    table = _reload(table)
    rows = sorted(table.read().to_pylist(), key=lambda r: r["order_id"])
    problems = list(state.errors)
    if rows != shop.expected_rows():
        problems.append(f"the table holds {len(rows):,} rows that differ from the source's {len(shop.truth):,}")
    if not _same_revenue(state.revenue, shop.revenue_by_customer()):
        problems.append("the downstream revenue per customer differs from the source's")
    files_before = _files(table)
    table.compact(full=True)
    files_after = _files(_reload(table))
    to_table = _table_latencies(job, producer)
    snapshots = table.snapshots()
    p = job.progress
    lines = [
        f"events      {shop.made:,} made by the source; {p.events:,} Kafka records ingested as {p.rows:,} changes",
        f"table       {TABLE}: {len(rows):,} rows, {len(table.schema)} columns ({', '.join(table.schema.names)})",
        f"schema      {'; '.join(p.schema_changes) or 'no change'}",
        f"snapshots   {sum(s.kind == 'APPEND' for s in snapshots)} appends, "
        f"{sum(s.kind == 'COMPACT' for s in snapshots)} compactions ({state.compactions} by the demo's compactor, "
        f"{state.compaction_conflicts} lost a race to the writer and left the data as it was)",
        f"files       {files_before} before the final full compaction, {files_after} after",
        f"latency     event -> readable in the table: p50 {_pct(to_table, 50):.2f} s, p99 {_pct(to_table, 99):.2f} s "
        f"({len(to_table):,} events)",
        f"            event -> change in the downstream query: p50 {_pct(state.downstream_lag_s, 50):.2f} s, "
        f"p99 {_pct(state.downstream_lag_s, 99):.2f} s ({len(state.downstream_lag_s):,} changes)",
        f"downstream  revenue of {len([v for v in state.revenue.values() if v != 0])} customers",
    ]
    console.print("\n".join(lines))
    if problems:
        console.print("[bold red]FAILED[/]: " + "; ".join(problems))
        return 1
    console.print("[bold green]OK[/]: the table and the downstream revenue equal the source's state")
    return 0


def _reload(table: tablestore.Table) -> tablestore.Table:
    """The table as it is now (the ingest job altered its schema meanwhile)."""
    return tablestore.Catalog(_warehouse_of(table)).get_table(TABLE)


def _warehouse_of(table: tablestore.Table) -> str:
    """The warehouse of a table of this demo (`<warehouse>/shop.db/orders`)."""
    return table.path.rsplit("/", 2)[0]
