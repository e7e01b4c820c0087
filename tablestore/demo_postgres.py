"""`tablestore demo`: the job tablestore exists for, on a real database, checked end to end against it.

1. the source (tablestore/demo_postgres_source.py): the Kafka broker, a development PostgreSQL and a Kafka Connect
   worker with Debezium's connector, each started unless it runs; a fresh database `shop_<hex>` holding customers
   (with a 4 KB TOASTed note each), products and orders, captured by a connector of its own;
2. one Spark query (`tablestore ingest-database`'s job, tablestore/spark/database_sync.py) reads every topic of
   that connector and keeps each PostgreSQL table in a managed table `shop.<table>`, creating it from its first
   record (Debezium's snapshot of the first rows, `op: r`);
3. once the snapshot is in its tables, the workload (tablestore/demo_postgres_workload.py): `rate` SQL
   transactions per second for `seconds`: new orders, order updates and deletes, vip flips that leave the TOASTed
   note alone, new customers, price changes; half way `ALTER TABLE orders ADD COLUMN coupon text` and a new table `reviews`, which the job picks up;
4. meanwhile a second streaming query keeps revenue per customer from `shop.orders`'s own changes
   (`readStream.format("managed")`: +I/+U add the amount, -U/-D take the old row's away), and `shop.orders` is
   compacted every 8 s beside the writer (optimistic commits: the loser of a race retries later);
5. after the workload: wait (at most 2 minutes) until every table and the revenue equal PostgreSQL's, stop both
   queries, check again (tablestore/demo_postgres_check.py: exit 1 with one line per difference), compact every
   table fully and report: rows, snapshots, files, schema changes, the TOAST updates, latency.
Whatever the demo started or made is stopped or removed at the end, however it ends.
"""
from __future__ import annotations

import shutil
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

import catalog as _catalog
import tablestore
from filestore import CommitConflictError, CommitRetriesExhaustedError
from tablestore import demo_postgres_check as check, demo_postgres_workload as workload
from tablestore.demo_postgres_source import DemoSource
from tablestore.demo_postgres_workload import ShopWorkload

DATABASE = "shop"
ORDERS = f"{DATABASE}.orders"
SNAPSHOT_S = 180.0
CATCH_UP_S = 120.0
COMPACT_EVERY_S = 8.0
CHECK_EVERY_S = 2.0
PLAIN_EVERY_S = 5.0


@dataclass
class DemoState:
    """What the demo's threads report (the downstream query's batches run on a thread of Spark's)."""

    revenue: dict[int, Decimal] = field(default_factory=dict)
    downstream_changes: int = 0
    downstream_lag_s: list[float] = field(default_factory=list)
    since_us: int = 2 ** 62
    """Epoch µs: the workload's start; the downstream times only the orders' versions made after it."""
    compactions: int = 0
    compaction_conflicts: int = 0
    errors: list[str] = field(default_factory=list)


def run_postgres_demo(*, warehouse: str | None = None, rate: int = 200, seconds: float = 60.0,
                      bootstrap_servers: str | None = None, master: str = "local[2]", postgres_port: int | None = None,
                      connect_port: int | None = None) -> int:
    """The demo (see the module docstring); 0 when every table and the downstream revenue equal PostgreSQL, else 1.

    `warehouse`: kept at the end, its database `shop` replaced at the start (default: a temporary directory, removed).
    `bootstrap_servers`: a Kafka cluster of your own (default: the project's broker). `master`: Spark's master URL.
    `postgres_port` / `connect_port`: where the development PostgreSQL / Connect worker listen if the demo starts
    them."""
    from rich.console import Console
    from rich.markup import escape

    console = Console(highlight=False, soft_wrap=True)
    source = DemoSource(bootstrap_servers=bootstrap_servers, postgres_port=postgres_port, connect_port=connect_port,
                        say=console.print)
    own_warehouse = warehouse is None
    warehouse = warehouse or tempfile.mkdtemp(prefix="tablestore-demo-")
    local_checkpoints: str | None = None
    spark: Any = None
    console.print(f"warehouse {warehouse}; starting the source and Spark ({master})")
    try:
        with ThreadPoolExecutor(1) as pool:   # the services start while Spark does
            opened = pool.submit(source.open)
            spark = _spark(warehouse, master)
            opened.result()
        from tablestore.spark.s3a import jvm_has_s3a, jvm_url

        if "://" in warehouse and not warehouse.startswith("file:") and not jvm_has_s3a(spark):
            local_checkpoints = tempfile.mkdtemp(prefix="tablestore-demo-checkpoints-")   # no S3A: on the driver
        cat = _catalog.Catalog(warehouse)
        down_checkpoint = (f"{local_checkpoints}/downstream" if local_checkpoints else
                           jvm_url(cat.io.object_store, f"{cat.database_path(DATABASE)}/_demo/{source.prefix}"))
        return _demo(console, spark, source, warehouse, rate, seconds,
                     ingest_checkpoint=f"{local_checkpoints}/ingest" if local_checkpoints else None,
                     down_checkpoint=down_checkpoint)
    finally:   # Spark first (its queries read the topics), the tables' log topics while their broker runs
        problems = [_quietly("stopping Spark", spark.stop)] if spark is not None else []
        if own_warehouse:
            problems.append(_quietly("dropping the demo's tables", lambda: tablestore.Catalog(warehouse).drop_database(
                DATABASE, ignore_if_not_exists=True, cascade=True)))
        for problem in [p for p in problems if p] + source.close():
            console.print(f"[yellow]warning[/]: {escape(problem)}")
        if own_warehouse:
            shutil.rmtree(warehouse, ignore_errors=True)
        if local_checkpoints:
            shutil.rmtree(local_checkpoints, ignore_errors=True)


def _spark(warehouse: str, master: str) -> Any:
    import tablestore.spark

    spark = tablestore.spark.session(warehouse, master=master, kafka=True, app_name="tablestore-demo",
                                     **{"spark.sql.shuffle.partitions": "2"})
    spark.sparkContext.setLogLevel("OFF")   # the demo reports its own errors; Spark logs expected ones too
    return spark


def _quietly(what: str, step: Callable[[], object]) -> str:
    """Run a clean-up step; what went wrong (one line), or "" (the rest of the clean-up goes on)."""
    try:
        step()
        return ""
    except Exception as e:  # noqa: BLE001 - reported as a warning: the demo's outcome is its check
        return f"clean-up: {what} failed: {type(e).__name__}: {e}"


def _demo(console: Any, spark: Any, source: DemoSource, warehouse: str, rate: int, seconds: float, *,
          ingest_checkpoint: str | None, down_checkpoint: str) -> int:
    from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob

    cat = tablestore.Catalog(warehouse)
    if cat.database_exists(DATABASE):   # a warehouse of an earlier demo: start afresh
        cat.drop_database(DATABASE, cascade=True)
    state = DemoState()
    job = DatabaseIngestJob(spark, DatabaseIngestConfig(
        database=DATABASE, topic_pattern=source.topic_pattern, bootstrap_servers=source.bootstrap,
        warehouse=warehouse, create=True, checkpoint=ingest_checkpoint, table_options={"bucket": "2"},
        catalog_options={"log.properties.bootstrap.servers": source.bootstrap}, trigger_interval="1 second"))
    shop = ShopWorkload(source.dsn())
    stop = threading.Event()
    threads = [_thread(job.run, "ingest", state)]
    down: Any = None
    try:
        with (workload.connect(source.dsn(), autocommit=True) as conn,
              _Status(console, job, shop, state, cat) as status):
            if not _snapshot_ingested(job, state, status, threads[0]):
                return _failed(console, state.errors or [
                    f"ingest: Debezium's snapshot of the first rows was not in the tables {SNAPSHOT_S:.0f} s after "
                    f"the job's start"])
            down = _downstream(spark, warehouse, down_checkpoint, state)
            state.since_us = int(time.time() * 1_000_000)
            threads += [_thread(lambda: shop.run(seconds, rate, stop), "workload", state),
                        _thread(lambda: _compact_now_and_then(warehouse, state, stop), "compaction", state)]
            caught_up = _run(conn, cat, job, shop, state, down, status, threads[0])
            _stop(job, stop, down, threads)
            status.update(force=True)
            seen = check.observe(conn, cat, DATABASE)
        problems = list(state.errors) + check.differences(seen, DATABASE, state.revenue)
        if not caught_up and not problems:
            problems.append(f"the tables did not catch up within {CATCH_UP_S:.0f} s of the workload's end")
        try:
            sent: int | None = check.placeholders_sent(spark, source.bootstrap, f"{source.prefix}.public.customers")
        except Exception:  # noqa: BLE001 - a figure of the report, not of the check
            sent = None
        return _report(console, source, shop, job, state, cat, seen, problems, sent)
    finally:
        _stop(job, stop, down, threads)


def _snapshot_ingested(job: Any, state: DemoState, status: "_Status", ingest: threading.Thread) -> bool:
    """Until the job has written Debezium's snapshot of the first rows (`op: r`) into their tables, so that the
    workload, and the latency measured on it, starts on a running job whose tables exist."""
    first = {f"{DATABASE}.customers": workload.CUSTOMER_ROWS, f"{DATABASE}.products": workload.PRODUCT_ROWS,
             ORDERS: workload.ORDER_ROWS}
    deadline = time.monotonic() + SNAPSHOT_S
    while ingest.is_alive() and not state.errors and time.monotonic() < deadline:
        status.update()
        done = dict(job.progress.tables)
        if all(done.get(name, 0) >= rows for name, rows in first.items()):
            return True
        time.sleep(0.5)
    return False


def _run(conn: Any, cat: tablestore.Catalog, job: Any, shop: ShopWorkload, state: DemoState, down: Any,
         status: "_Status", ingest: threading.Thread) -> bool:
    """Until the workload has ended and every table and the revenue equal PostgreSQL (True), or an error, or
    `CATCH_UP_S` after the workload's end (False)."""
    deadline = next_check = 0.0
    while ingest.is_alive() and not state.errors:
        status.update()
        if down.exception() is not None:
            state.errors.append(f"downstream query: {down.exception()}")
        time.sleep(0.5)
        now = time.monotonic()
        if shop.counts.done and now >= next_check:
            deadline = deadline or now + CATCH_UP_S
            next_check = now + CHECK_EVERY_S
            if not check.differences(check.observe(conn, cat, DATABASE), DATABASE, dict(state.revenue)):
                return True
            if now > deadline:
                return False
    return False


def _stop(job: Any, stop: threading.Event, down: Any, threads: list[threading.Thread]) -> None:
    """Both queries and the demo's threads (the workload's and the compactor's), each once."""
    stop.set()
    job.request_stop()
    if down is not None and down.isActive:
        down.stop()
    for t in threads:
        t.join(120)


def _thread(target: Callable[[], object], what: str, state: DemoState) -> threading.Thread:
    def guarded() -> None:
        try:
            target()
        except Exception as e:  # noqa: BLE001 - reported at the end, the demo fails
            state.errors.append(f"{what}: {type(e).__name__}: {e}")

    thread = threading.Thread(target=guarded, name=f"demo-{what}", daemon=True)
    thread.start()
    return thread


def _compact_now_and_then(warehouse: str, state: DemoState, stop: threading.Event) -> None:
    while not stop.wait(COMPACT_EVERY_S):
        try:
            # loaded again each time: the job alters its schema; None: nothing needed compacting
            if tablestore.Catalog(warehouse).get_table(ORDERS).compact() is not None:
                state.compactions += 1
        except (CommitConflictError, CommitRetriesExhaustedError):
            state.compaction_conflicts += 1   # the writer won the race: nothing lost, the next round compacts


def _downstream(spark: Any, warehouse: str, checkpoint: str, state: DemoState) -> Any:
    """Revenue per customer from `shop.orders`'s changes: +I/+U add the row's amount, -U/-D take the old row's
    away; summed per customer in Spark, so the driver sees one row per customer and micro-batch."""
    from pyspark.sql import functions as F

    changes = spark.readStream.format("managed").option("warehouse", warehouse).load(ORDERS)

    def apply(batch: Any, batch_id: int) -> None:
        adds = F.col("_row_kind").isin("+I", "+U")
        made_us = F.unix_micros(F.col("updated_at").cast("timestamp"))
        sums = batch.groupBy("customer_id").agg(
            F.sum(F.when(adds, F.col("amount")).otherwise(-F.col("amount"))).alias("revenue"),
            F.count(F.lit(1)).alias("changes"),
            F.collect_list(F.when(adds & (made_us >= F.lit(state.since_us)), made_us)).alias("made")).collect()
        seen_us = time.time() * 1_000_000   # the batch's result is in the driver: the downstream has it
        for r in sums:
            state.revenue[r["customer_id"]] = state.revenue.get(r["customer_id"], Decimal(0)) + (r["revenue"] or 0)
            state.downstream_changes += r["changes"]
            state.downstream_lag_s.extend((seen_us - m) / 1e6 for m in r["made"])

    return (changes.writeStream.foreachBatch(apply).option("checkpointLocation", checkpoint)
            .queryName("tablestore-demo-revenue").trigger(processingTime="1 second").start())


class _Status:
    """Progress while the demo runs: rich's live box on a terminal, else (piped) a plain line every 5 s."""

    def __init__(self, console: Any, job: Any, shop: ShopWorkload, state: DemoState, cat: tablestore.Catalog) -> None:
        self.console, self.job, self.shop, self.state, self.cat = console, job, shop, state, cat
        self.started = time.monotonic()
        self.rows: dict[str, int] = {}
        self.counted = self.printed = 0.0
        self.live: Any = None

    def __enter__(self) -> "_Status":
        if self.console.is_terminal:
            from rich.live import Live

            self.live = Live(self._box(), console=self.console, refresh_per_second=2)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.live is None and not force and now - self.printed < PLAIN_EVERY_S:
            return
        if force or now - self.counted >= CHECK_EVERY_S:
            self.counted = now
            for name in dict(self.job.progress.tables):
                self.rows[name] = self.cat.get_table(name).read(columns=["id"]).num_rows
        if self.live is not None:
            self.live.update(self._box())
        else:
            self.printed = now
            self.console.print(f"[{now - self.started:4.0f} s] " + "; ".join(f"{k}: {v}" for k, v in self._lines()),
                               markup=False, soft_wrap=True)   # piped: one line, never wrapped at 80

    def _lines(self) -> list[tuple[str, str]]:
        c, p, s = self.shop.counts, self.job.progress, self.state
        if c.started_at is None:
            source = "the first rows: waiting until Debezium's snapshot of them is in the tables"
        else:
            pace = c.transactions / max(c.seconds or time.time() - c.started_at, 1e-9)
            source = (f"{c.transactions:,} transactions" + (" (done)" if c.done else f", {pace:,.0f}/s") +
                      (f", {len(c.ddl)} DDL" if c.ddl else ""))
        lines = [("source", source)]
        events = sorted(dict(p.tables).items())
        lines += [(name, f"{n:,} events, {self.rows.get(name, 0):,} rows") for name, n in events]
        lines += [("ingest", f"{p.batches} micro-batches, last {p.last_batch_s or 0:.1f} s, "
                             f"{len(p.schema_changes)} schema changes ({p.state})"),
                  ("downstream", f"{s.downstream_changes:,} changes, revenue of {len(s.revenue)} customers"),
                  ("compaction", f"{s.compactions} of {ORDERS} committed, {s.compaction_conflicts} lost a race")]
        return lines

    def _box(self) -> Any:
        from rich.table import Table

        box = Table(title=f"tablestore demo: PostgreSQL -> Debezium -> Kafka -> {DATABASE}.* -> revenue per customer "
                          f"({time.monotonic() - self.started:.0f} s)", show_header=False)
        for key, value in self._lines():
            box.add_row(key, value)
        return box


def _failed(console: Any, problems: list[str]) -> int:
    console.print("[bold red]FAILED[/]:")
    for line in problems:
        console.print(f"  {line}", markup=False)
    return 1


def _report(console: Any, source: DemoSource, shop: ShopWorkload, job: Any, state: DemoState,
            cat: tablestore.Catalog, seen: check.Observed, problems: list[str], placeholders: int | None) -> int:
    c, p = shop.counts, job.progress
    made = ", ".join(f"{n:,} {kind}" for kind, n in c.statements.most_common())
    orders = cat.get_table(ORDERS)
    to_table = check.order_latencies(orders, c.started_at or 0.0)
    lines = [f"source      PostgreSQL database {source.database}: {c.transactions:,} transactions in {c.seconds:.0f} s "
             f"({c.transactions / max(c.seconds, 1e-9):,.0f}/s): {made}",
             f"            half way: {'; '.join(c.ddl) or '-'}",
             f"ingest      one Spark query on the topics {source.prefix}.public.*: {p.events:,} events in "
             f"{p.batches} micro-batches; created {', '.join(p.created)}"]
    for t in seen.source:
        name = f"{DATABASE}.{t}"
        if not cat.table_exists(name):
            continue
        table = cat.get_table(name)
        snapshots = table.snapshots()
        before = _files(table)
        table.compact(full=True)
        managed = seen.managed[t]
        kinds = [s.kind for s in snapshots]
        lines.append(f"table       {name}: {len(managed[1]) if managed else 0:,} rows; snapshots: "
                     f"{kinds.count('APPEND')} APPEND, {kinds.count('COMPACT')} COMPACT; files: {before}, "
                     f"{_files(cat.get_table(name))} after a full compaction")
    flips = c.statements["vip flip"]
    kept = check.toast_kept(seen, c.flipped)
    lines += [
        f"schema      {'; '.join(p.schema_changes) or 'no change'}",
        f"TOAST       {flips:,} vip flips of {len(c.flipped):,} customers left the 4 KB note alone: Debezium sent its "
        f"placeholder for it in {'?' if placeholders is None else f'{placeholders:,}'} records; {kept:,} of "
        f"{len(c.flipped):,} flipped customers' notes kept as PostgreSQL has them",
        f"latency     an order's version (insert or update) from its updated_at = clock_timestamp() in PostgreSQL to "
        f"the commit of the first snapshot of {ORDERS} holding it: p50 {check.pct(to_table, 50):.2f} s, "
        f"p99 {check.pct(to_table, 99):.2f} s, max {check.pct(to_table, 100):.2f} s ({len(to_table):,} versions)",
        f"            ... to its change in the downstream query: p50 {_lag(state, 50):.2f} s, "
        f"p99 {_lag(state, 99):.2f} s ({len(state.downstream_lag_s):,} changes)",
        f"downstream  {state.downstream_changes:,} changes of {ORDERS}: revenue of "
        f"{sum(1 for v in state.revenue.values() if v != 0)} customers; compaction beside the writer (every "
        f"{COMPACT_EVERY_S:.0f} s): {state.compactions} committed, {state.compaction_conflicts} lost a race to it and "
        f"left the data as it was",
    ]
    console.print("\n".join(lines), markup=False)
    if problems:
        return _failed(console, problems)
    console.print("[bold green]OK[/]: every table and the downstream revenue equal PostgreSQL")
    return 0


def _lag(state: DemoState, q: float) -> float:
    import numpy as np

    return check.pct(np.array(state.downstream_lag_s), q)


def _files(table: tablestore.Table) -> int:
    return int(str(table.describe()["file_count"]))
