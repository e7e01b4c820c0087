"""The compressed long run of issue 50: `tablestore ingest-database` keeping --tables tables from CDC topics at
--rate events/s for --minutes, once with `write-only = true` tables and the real `tablestore service` compacting
them (mode `service`), once with the same seeds and compaction in the writers (mode `writers`).

    python bench/service_long_run_bench.py [--minutes 30] [--rate 10000] [--tables 4] [--mode service|writers|both]
                                           [--keys 50000] [--retain 30] [--out bench/out/service_long_run_bench.json]

First a warm-up (a small ingest-database run with Trigger.AvailableNow, write-only and not), so that the mode run
first does not pay the JVM's first micro-batches. Then per mode, in a warehouse of its own:
1. a producer thread plays the shop generator (tablestore.cdc.shop, one per table, seeds 11 + i) into the topics
   `<prefix>.public.t<i>` at --rate events/s spread over the tables; the generator's `updated_at` is the time the
   event was made, so a reader can tell how old a change is;
2. the ingest-database job (tablestore.spark.database_sync, what `tablestore ingest-database` runs; local[2], a 2 GB driver,
   1 s trigger, tables created from their first record with bucket 2, `snapshot.num-retained.min` 5,
   `snapshot.num-retained.max` --retain, and `write-only = true` in mode service) keeps the tables;
3. `tablestore service --warehouse W --detach` (a process of its own: its CPU and RSS are its own) in both modes:
   in mode service it compacts the write-only tables (and the writers wait at `num-sorted-run.stop-trigger`), in
   mode writers it only expires snapshots (the writers compact), so snapshots are expired in both;
4. every --sample-s seconds, per table: sorted runs per bucket (max), snapshots kept (DESCRIBE DETAIL), three timed
   1% key-range reads and their freshness (read end minus the newest `updated_at` read: the end-to-end latency
   from the event's making to its being readable, at the resolution of the range's update rate), the committed
   events (the job's progress) and the service's CPU% and RSS;
5. a consumer (`Table.read_changes(consumer_id="bench")`, tables of ingest-database have a Kafka log) reads shop.t0
   for the first third of the run, pauses for a third (only its recorded progress remains; expiry must keep what
   it needs), resumes; after the producer stops and the job has committed every event, it drains and is checked
   against the table: every key's last change seen, no delete missed; each table is checked against its
   generator's truth.
Windows scale with --minutes: first and last window --minutes / 6 each (5 of 30 minutes), the pause --minutes / 3.
Figures (targets of issue 50): ingest events/s service/writers >= 1.2x (committed events per second of the
micro-batches' busy time: both modes are fed the same --rate, so the committed rate is the producer's while the job
keeps up), end-to-end latency p99 of each, range-read p99 last/first window <= 1.2, max sorted runs <= the stop
trigger, snapshots kept <= the retention (+ the snapshots made in one expiry interval, one service turn and one
sample interval: a sample can come just before an expiry), consumer missed = 0, the
service's CPU% and RSS slope after the first window (flat). Needs the project's Kafka broker: started if none runs
(TABLESTORE_KAFKA_PORT / TABLESTORE_KAFKA_CONTROLLER_PORT / TABLESTORE_KAFKA_DIR choose where) and stopped after.
"""
from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import logstore  # noqa: E402
import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from long_run_parts import (PausedConsumer, Producer, ServiceProcess, percentile, sample_table,  # noqa: E402
                            slope_per_min)
from logstore import broker  # noqa: E402
from logstore.kafka import KafkaAdmin  # noqa: E402
from tablestore.cdc.shop import ShopOrders  # noqa: E402
from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob  # noqa: E402

SEED = 11
CONSUMER = "bench"
STOP_TRIGGER = 8   # num-sorted-run.stop-trigger's default: compaction-trigger 5 + 3


def _options(args: argparse.Namespace, write_only: bool) -> dict[str, str]:
    opts = {"bucket": "2", "snapshot.num-retained.min": "5", "snapshot.num-retained.max": str(args.retain),
            "num-sorted-run.stop-trigger": str(STOP_TRIGGER)}
    if write_only:
        opts["write-only"] = "true"
    return opts


def warm_up(spark: Any, args: argparse.Namespace, bootstrap: str, work: Path) -> float:
    """A small ingest-database run (Trigger.AvailableNow) into a warehouse of its own before the measured modes, so
    that neither mode pays the JVM's first micro-batches (the Kafka source, the decoders, the write job); seconds."""
    began = time.monotonic()
    prefix = f"lrw{uuid.uuid4().hex[:6]}"
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}.public.t{i}" for i in range(args.tables)]
    for t in topics:
        admin.create_topic(t, 1, None)
    for i, t in enumerate(topics):
        logstore.produce_raw({"bootstrap.servers": bootstrap}, t, ShopOrders(keys=500, seed=SEED + i).events(1000))
    for write_only in (True, False):
        warehouse = work / f"warm-{write_only}"
        DatabaseIngestJob(spark, DatabaseIngestConfig(
            database="shop", topic_pattern=rf"{prefix}\.public\..*", bootstrap_servers=bootstrap,
            warehouse=str(warehouse), create=True,
            catalog_options={"log.properties.bootstrap.servers": bootstrap},
            table_options=_options(args, write_only), checkpoint=f"{warehouse}/ck", available_now=True,
            max_offsets_per_trigger=max(1, 500 * args.tables))).run()
    return time.monotonic() - began


def _jvm_end() -> str:
    """How the session's JVM ended, when it did: its exit code (0: it saw its stdin, PySpark's pipe, close) or the
    signal that killed it."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway   # type: ignore[attr-defined]
    proc = getattr(gateway, "proc", None)
    code = None if proc is None else proc.poll()
    if code is None:
        return ""
    return f" (the Spark JVM exited: {'signal ' + str(-code) if code < 0 else 'code ' + str(code)})"


def run_mode(spark: Any, args: argparse.Namespace, mode: str, bootstrap: str, work: Path) -> dict[str, Any]:
    total_s = args.minutes * 60
    window_s, pause_s = total_s / 6, total_s / 3
    warehouse = work / mode
    prefix = f"lr{mode[0]}{uuid.uuid4().hex[:6]}"
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}.public.t{i}" for i in range(args.tables)]
    for t in topics:
        admin.create_topic(t, 1, None)
    names = [f"shop.t{i}" for i in range(args.tables)]
    job = DatabaseIngestJob(spark, DatabaseIngestConfig(
        database="shop", topic_pattern=rf"{prefix}\.public\..*", bootstrap_servers=bootstrap,
        warehouse=str(warehouse), create=True, catalog_options={"log.properties.bootstrap.servers": bootstrap},
        table_options=_options(args, mode == "service"), checkpoint=f"{warehouse}/ck", trigger_interval="1 second"))
    failure: list[BaseException] = []

    def ingest() -> None:
        try:
            job.run()
        except BaseException as e:  # noqa: BLE001 - reported below
            failure.append(e)

    runner = threading.Thread(target=ingest, name="bench-ingest", daemon=True)
    producer = Producer(bootstrap, topics, args.rate, args.keys, SEED)
    warehouse.mkdir(parents=True)
    service = ServiceProcess(str(warehouse), work / f"service-{mode}", interval_s=args.service_interval,
                             expire_interval_s=args.expire_interval)
    print(f"[{mode}] service pid {service.pid} on port {service.port}; ingest of {args.tables} tables at "
          f"{args.rate:,.0f} events/s for {args.minutes:g} min", flush=True)
    samples: list[dict[str, Any]] = []
    consumer: PausedConsumer | None = None
    cat = tablestore.Catalog(str(warehouse))
    tables: dict[str, Any] = {}
    rng = random.Random(SEED)
    try:
        runner.start()
        producer.start()
        t0 = producer.started
        service.sample()
        while (elapsed := time.monotonic() - t0) < total_s:
            if failure or producer.error:
                raise SystemExit(f"[{mode}] stopped: {failure[0] if failure else producer.error}{_jvm_end()}")
            for i, name in enumerate(names):
                if name not in tables and cat.table_exists(name):
                    tables[name] = cat.get_table(name)
            if consumer is None and names[0] in tables and tables[names[0]].latest_snapshot_id():
                consumer = PausedConsumer(cat.get_table(names[0]), CONSUMER, t0, pause_s, 2 * pause_s)
                consumer.start()
            sample: dict[str, Any] = {"t": elapsed, "events": job.progress.events, "produced": producer.records,
                                      "busy_s": sum(job.progress.phases_s.values()), "batches": job.progress.batches,
                                      "tables": {}}
            for i, name in enumerate(names):
                if name in tables:
                    sample["tables"][name] = sample_table(tables[name], producer.next_id(i), rng, args.reads)
            sample["service"] = service.sample()
            samples.append(sample)
            _progress_line(mode, sample, consumer)
            time.sleep(max(0.0, args.sample_s - (time.monotonic() - t0 - elapsed)))
        producer.stop()
        produced = producer.records
        deadline = time.monotonic() + args.drain_timeout
        while job.progress.events < produced and time.monotonic() < deadline and not failure:
            print(f"[{mode}] draining: committed {job.progress.events:,} of {produced:,}", flush=True)
            time.sleep(5)
        caught_up_s = time.monotonic() - t0 - total_s
        if job.progress.events < produced:
            print(f"[{mode}] the job did not catch up within --drain-timeout {args.drain_timeout:.0f} s: the "
                  f"checks below compare a table that lacks the last events", flush=True)
        final_sample = {"t": time.monotonic() - t0, "events": job.progress.events, "produced": produced,
                        "busy_s": sum(job.progress.phases_s.values()), "tables": {
                            n: sample_table(tables[n], producer.next_id(i), rng, 1) for i, n in enumerate(names)
                            if n in tables}, "service": service.sample()}
        job.request_stop()
        runner.join(300)
        if failure:
            raise SystemExit(f"[{mode}] ingest failed: {failure[0]}")
        check: dict[str, Any] = {"consumer": None, "tables_equal_truth": True}
        if consumer is not None:
            consumer.stop()
            if consumer.error is not None:
                raise SystemExit(f"[{mode}] consumer failed: {consumer.error!r}")
            consumer.drain()
            final = cat.get_table(names[0]).read(columns=["order_id", "updated_at"])
            check["consumer"] = {**consumer.missed(final), "changes": consumer.changes, "reads": consumer.reads,
                                 "paused_s": consumer.paused_s}
        for i, name in enumerate(names):
            rows = sorted(cat.get_table(name).read().to_pylist(), key=lambda r: r["order_id"])
            if rows != producer.shops[i].expected_rows():
                check["tables_equal_truth"] = False
                print(f"[{mode}] table {name} differs from its generator's truth", flush=True)
        service_errors = service.errors()
    finally:   # every part stopped, whatever failed
        def stop_ingest() -> None:
            if runner.is_alive():
                job.request_stop()
                runner.join(300)

        for part, stop in (("producer", lambda: producer.stop() if producer.is_alive() else None),
                           ("ingest", stop_ingest),
                           ("consumer", lambda: consumer.stop() if consumer is not None and consumer.is_alive()
                            else None),
                           ("service", service.stop)):
            try:
                stop()
            except BaseException as e:  # noqa: BLE001 - the others still stop
                print(f"[{mode}] stopping the {part}: {e!r}", flush=True)
    return {"mode": mode, "produced_records": produced, "committed_events": job.progress.events,
            "caught_up_after_s": caught_up_s, "caught_up": job.progress.events >= produced,
            "producer_behind_s": producer.behind_s,
            "phases_s": dict(job.progress.phases_s), "batches": job.progress.batches, "samples": samples,
            "final": final_sample, "check": check, "service_errors_logged": service_errors,
            "window_s": window_s, "pause_s": pause_s, "total_s": total_s}


def _progress_line(mode: str, s: dict[str, Any], consumer: PausedConsumer | None) -> None:
    runs = max((t["max_runs"] for t in s["tables"].values()), default=0)
    snaps = max((t["snapshots"] for t in s["tables"].values()), default=0)
    reads = [ms for t in s["tables"].values() for ms in t["read_ms"]]
    cpu = s["service"]["cpu_pct"]
    print(f"[{mode}] {s['t']:6.0f} s  batches {s['batches']:>4}  produced {s['produced']:>9,}  committed "
          f"{s['events']:>9,}  runs<={runs}  "
          f"snapshots<={snaps}  read {max(reads, default=0):6.1f} ms  service cpu "
          f"{'-' if cpu is None else f'{cpu:.0f}%'} rss {s['service']['rss_mb'] or 0:.0f} MB  consumer "
          f"{'-' if consumer is None else f'{consumer.changes:,}'}", flush=True)


def summarize(r: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    samples, w, total = r["samples"], r["window_s"], r["total_s"]
    first = [ms for s in samples if s["t"] < w for t in s["tables"].values() for ms in t["read_ms"]]
    last = [ms for s in samples if s["t"] >= total - w for t in s["tables"].values() for ms in t["read_ms"]]
    fresh = [f for s in samples if s["t"] >= w for t in s["tables"].values() for f in t["freshness_s"]]
    steady = [s for s in samples if s["t"] >= w]
    events = (steady[-1]["events"] - steady[0]["events"]) if len(steady) > 1 else 0
    span = (steady[-1]["t"] - steady[0]["t"]) if len(steady) > 1 else 0
    busy = (steady[-1]["busy_s"] - steady[0]["busy_s"]) if len(steady) > 1 else 0
    others = [t["snapshots"] for s in samples for n, t in s["tables"].items() if n != "shop.t0"]
    consumer_table = [(s["t"], t["snapshots"]) for s in samples for n, t in s["tables"].items() if n == "shop.t0"]
    ids = [(s["t"], t["snapshot_id"]) for s in samples for n, t in s["tables"].items()
           if t["snapshot_id"] is not None and (n == "shop.t1" or (args.tables == 1 and n == "shop.t0"))]
    snaps_per_s = (ids[-1][1] - ids[0][1]) / (ids[-1][0] - ids[0][0]) if len(ids) > 1 and ids[-1][0] > ids[0][0] \
        else 0.0
    service_points = [(s["t"], s["service"]) for s in steady]
    p1, p2 = percentile(first, 99), percentile(last, 99)
    return {
        "committed_events_per_s": events / span if span else None,
        "events_per_busy_s": events / busy if busy else None,
        "busy_fraction": busy / span if span else None,
        "e2e_latency_p50_s": percentile(fresh, 50), "e2e_latency_p99_s": percentile(fresh, 99),
        "range_read_p99_first_ms": p1, "range_read_p99_last_ms": p2,
        "range_read_last_over_first": p2 / p1 if p1 and p2 else None,
        "max_sorted_runs": max((t["max_runs"] for s in samples for t in s["tables"].values()), default=0),
        "max_snapshots_kept": max(others, default=None),
        "snapshot_bound": args.retain + int(snaps_per_s * (args.expire_interval + args.service_interval
                                                           + args.sample_s) + 1),
        "consumer_table_max_snapshots_in_pause": max((n for t, n in consumer_table
                                                      if total / 3 <= t < 2 * total / 3), default=None),
        "consumer_table_snapshots_at_end": consumer_table[-1][1] if consumer_table else None,
        "consumer": r["check"]["consumer"], "tables_equal_truth": r["check"]["tables_equal_truth"],
        "service_cpu_pct_mean": _mean([p["cpu_pct"] for _, p in service_points]),
        "service_cpu_pct_slope_per_min": slope_per_min([(t, p["cpu_pct"]) for t, p in service_points
                                                        if p["cpu_pct"] is not None]),
        "service_rss_mb_mean": _mean([p["rss_mb"] for _, p in service_points]),
        "service_rss_mb_slope_per_min": slope_per_min([(t, p["rss_mb"]) for t, p in service_points
                                                       if p["rss_mb"] is not None]),
        "caught_up": r["caught_up"], "caught_up_after_s": r["caught_up_after_s"],
        "service_errors_logged": r["service_errors_logged"],
    }


def _mean(values: list[float | None]) -> float | None:
    xs = [v for v in values if v is not None]
    return sum(xs) / len(xs) if xs else None


def _fmt(v: Any, spec: str = ",.1f") -> str:
    return "-" if v is None else format(v, spec) if isinstance(v, (int, float)) else str(v)


def report(figures: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    s, w = figures.get("service", {}), figures.get("writers", {})
    ratio = (s["events_per_busy_s"] / w["events_per_busy_s"]) if s.get("events_per_busy_s") and \
        w.get("events_per_busy_s") else None
    rows: list[dict[str, Any]] = []

    def row(name: str, key: str, target: str, ok: Any = None, spec: str = ",.1f") -> None:
        rows.append({"figure": name, "service": s.get(key), "writers": w.get(key), "target": target, "ok": ok})
        print(f"{name:<44} {_fmt(s.get(key), spec):>12} {_fmt(w.get(key), spec):>12}  {target:<28} "
              f"{'' if ok is None else 'ok' if ok else 'MISSED'}")

    def each(key: str, test: Any) -> bool | None:
        found = [f[key] for f in (s, w) if f and f.get(key) is not None]
        return None if not found else all(test(v, f) for v, f in zip(found, [f for f in (s, w) if f]))

    print(f"{'figure':<44} {'service':>12} {'writers':>12}  {'target':<28}")
    row("ingest committed events/s", "committed_events_per_s", "= --rate while it keeps up")
    row("ingest events/s of busy time", "events_per_busy_s", "service/writers >= 1.2",
        None if ratio is None else ratio >= 1.2)
    print(f"{'  ratio service/writers':<44} {_fmt(ratio, '.2f'):>12}")
    rows.append({"figure": "ingest ratio service/writers", "service": ratio, "target": ">= 1.2"})
    row("job busy fraction", "busy_fraction", "< 1 (keeps up)", spec=".2f")
    row("backlog committed s after the producer stopped", "caught_up_after_s", "report")
    row("end-to-end latency p50 (s)", "e2e_latency_p50_s", "report", spec=".2f")
    row("end-to-end latency p99 (s)", "e2e_latency_p99_s", "report", spec=".2f")
    row("1% range read p99, first window (ms)", "range_read_p99_first_ms", "report")
    row("1% range read p99, last window (ms)", "range_read_p99_last_ms", "report")
    row("  last / first", "range_read_last_over_first", "<= 1.2",
        each("range_read_last_over_first", lambda v, f: v <= 1.2), spec=".2f")
    row("max sorted runs per bucket", "max_sorted_runs", f"<= stop-trigger {STOP_TRIGGER}",
        each("max_sorted_runs", lambda v, f: v <= STOP_TRIGGER), spec="d")
    row("max snapshots kept (tables without consumer)", "max_snapshots_kept", "<= retention + 1 interval",
        each("max_snapshots_kept", lambda v, f: v <= f["snapshot_bound"]), spec="d")
    row("  bound (retention + 1 expiry interval)", "snapshot_bound", "", spec="d")
    row("consumer table: max snapshots in the pause", "consumer_table_max_snapshots_in_pause", "kept for it",
        spec="d")
    row("consumer table: snapshots at the end", "consumer_table_snapshots_at_end", "<= bound again",
        each("consumer_table_snapshots_at_end", lambda v, f: v <= f["snapshot_bound"]), spec="d")
    missed = {k: (f.get("consumer") or {}).get("missed") for k, f in (("service", s), ("writers", w))}
    rows.append({"figure": "consumer missed", **missed, "target": "0"})
    ok = None if all(v is None for v in missed.values()) else all(v == 0 for v in missed.values() if v is not None)
    print(f"{'consumer missed (paused 1/3 of the run)':<44} {_fmt(missed['service'], 'd'):>12} "
          f"{_fmt(missed['writers'], 'd'):>12}  {'0':<28} {'' if ok is None else 'ok' if ok else 'MISSED'}")
    row("tables equal their generator's truth", "tables_equal_truth", "True",
        each("tables_equal_truth", lambda v, f: v is True), spec="")
    row("service CPU% (mean after first window)", "service_cpu_pct_mean", "report")
    row("service CPU% slope per minute", "service_cpu_pct_slope_per_min", "flat (~0)", spec=".2f")
    row("service RSS MB (mean after first window)", "service_rss_mb_mean", "report")
    row("service RSS MB slope per minute", "service_rss_mb_slope_per_min", "flat (~0)", spec=".2f")
    row("service duty failures logged", "service_errors_logged", "0", spec="d")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--rate", type=float, default=10_000.0, help="events/s into all tables together")
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--mode", choices=("service", "writers", "both"), default="both")
    parser.add_argument("--keys", type=int, default=50_000, help="live orders per table at most (the generator's)")
    parser.add_argument("--retain", type=int, default=30, help="snapshot.num-retained.max of the tables")
    parser.add_argument("--sample-s", type=float, default=None, help="seconds between samples (default: "
                        "minutes * 60 / 300, at least 2)")
    parser.add_argument("--reads", type=int, default=3, help="1%% key-range reads per table per sample")
    parser.add_argument("--service-interval", type=float, default=1.0, help="the service's --interval")
    parser.add_argument("--expire-interval", type=float, default=5.0, help="the service's --expire-interval")
    parser.add_argument("--drain-timeout", type=float, default=600.0,
                        help="seconds the job may take to commit the backlog after the producer stops")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "out" /
                                             "service_long_run_bench.json"))
    args = parser.parse_args()
    if args.sample_s is None:
        args.sample_s = max(2.0, args.minutes * 60 / 300)
    started_broker = broker.status() is None
    bootstrap = broker.status() or broker.start()
    print(f"Kafka broker {bootstrap}{' (started here)' if started_broker else ''}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="service-long-run-"))
    spark = None
    results: dict[str, Any] = {"args": vars(args), "bootstrap": bootstrap, "runs": {}, "figures": {}}
    try:
        spark = tablestore.spark.session(str(work), master="local[2]", kafka=True, **{"spark.driver.memory": "2g"})
        spark.sparkContext.setLogLevel("OFF")
        results["warm_up_s"] = warm_up(spark, args, bootstrap, work)
        print(f"warm-up (ingest-database of {args.tables} small tables, twice): {results['warm_up_s']:.1f} s",
              flush=True)
        for mode in (("service", "writers") if args.mode == "both" else (args.mode,)):
            run = results["runs"][mode] = run_mode(spark, args, mode, bootstrap, work)
            results["figures"][mode] = summarize(run, args)
        results["table"] = report(results["figures"])
    finally:
        if spark is not None:
            spark.stop()
        if started_broker:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2, default=str))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
