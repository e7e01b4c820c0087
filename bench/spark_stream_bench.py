"""Streaming writes through the `managed` sink: 10 micro-batches of 100k upserts over 1M keys into a primary-key
table with a log, for log.consistency transactional and eventual, local[2].

    python bench/spark_stream_bench.py [--batches 10] [--rows 100000] [--keys 1000000] [--buckets 2]

After a warm-up pass (each case once on 2 micro-batches of 10k rows, not reported), measures per consistency:
rows/s of the whole query (Trigger.AvailableNow over pre-written Parquet files, one file
per micro-batch), and the end-to-end latency from a micro-batch's snapshot commit to a `latest` reader of the log
(a Python thread on `Table.read_changes`) seeing the batch's first record, p50/p99 (negative: the records were
visible before the snapshot, as eventual consistency allows); that reader decodes every record in Python, so on a
loaded machine it lags. Also the same latency from the log's end offsets (polled every 20 ms, read_committed for
transactional): when the batch's records became readable. Prints a table, writes bench/out/spark_stream.json.
Not a test: figures depend on the machine's load. Needs the Kafka broker (TABLESTORE_BOOTSTRAP, default
127.0.0.1:19092).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import catalog  # noqa: E402
import tablestore  # noqa: E402
from filestore import CommitKind  # noqa: E402
from logstore.kafka import KafkaAdmin  # noqa: E402
import tablestore.spark  # noqa: E402
from tablestore.spark.types import spark_schema  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int64()), ("b", pa.float64()), ("c", pa.string()),
                    ("batch", pa.int32())])
BOOTSTRAP_KEY = "table-storage.log.properties.bootstrap.servers"


def _inputs(directory: Path, batches: int, rows: int, keys: int) -> None:
    rng = np.random.default_rng(7)
    directory.mkdir(parents=True)
    start = time.time() - 10_000
    for b in range(batches):
        ids = rng.integers(0, keys, rows)
        table = pa.table({"id": ids, "a": rng.integers(0, 1 << 40, rows), "b": rng.random(rows),
                          "c": pa.array([f"v{i % 997}" for i in range(rows)]), "batch": np.full(rows, b, np.int32)},
                         schema=SCHEMA)
        path = directory / f"b{b:03d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (start + b, start + b))


def _run(spark: Any, work: Path, consistency: str, args: argparse.Namespace, bootstrap: str) -> dict[str, Any]:
    warehouse = work / f"wh-{consistency}"
    cat = tablestore.Catalog(str(warehouse), options={BOOTSTRAP_KEY: bootstrap})
    cat.create_database("db")
    table = cat.create_table("db.orders", SCHEMA, primary_key=["id"], options={
        "bucket": str(args.buckets), "log.consistency": consistency})
    seen: dict[int, float] = {}
    stop = threading.Event()

    def reader() -> None:
        # the log's records as stored: the latency of the log itself, comparable with earlier figures
        changes = table.read_changes(scan="latest", timeout_s=3600, normalize=False)
        for batch in changes:
            now = time.time()
            for b in set(batch.column("batch").to_pylist()):
                seen.setdefault(int(b), now)
            if stop.is_set() or len(seen) >= args.batches:
                return

    probes: list[tuple[float, dict[int, int]]] = []

    def prober() -> None:
        """The log's end offsets every 20 ms, as a reader sees them (read_committed for transactional): when a
        batch's records became readable, without the cost of decoding them (the reader above pays that)."""
        log = catalog.Catalog(str(warehouse), {BOOTSTRAP_KEY: bootstrap}).get_table("db.orders").log
        assert log is not None
        admin = KafkaAdmin(log.options.properties, log.options.request_timeout_s)
        while not stop.is_set():
            ends = admin.list_offsets(log.options.topic, log.options.partitions, timestamp_ms=None,
                                      read_committed=consistency == "transactional")
            probes.append((time.time(), ends))
            time.sleep(0.02)

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    probe = threading.Thread(target=prober, daemon=True)
    probe.start()
    time.sleep(2)
    try:
        df = spark.readStream.schema(spark_schema(SCHEMA)).option(
            "maxFilesPerTrigger", 1).parquet(str(work / "in"))
        started = time.monotonic()
        query = (df.writeStream.format("managed").option("warehouse", str(warehouse))
                 .option(BOOTSTRAP_KEY, bootstrap).option("checkpointLocation", str(work / f"ck-{consistency}"))
                 .trigger(availableNow=True).start("db.orders"))
        query.awaitTermination()
        elapsed = time.monotonic() - started
        thread.join(timeout=30)
        stop.set()
        commits = {s.commit_identifier - 1: s.time_millis / 1000 for s in table.snapshots() if s.kind == "APPEND"}
        latencies = sorted((seen[b] - commits[b]) * 1000 for b in commits if b in seen)
        handle = catalog.Catalog(str(warehouse), {BOOTSTRAP_KEY: bootstrap}).get_table("db.orders")
        visible = []
        for snap in handle.store.snapshots.snapshots():
            if snap.commit_kind != CommitKind.APPEND or not snap.log_offsets:
                continue
            at = next((t for t, ends in probes if all(ends.get(p, 0) >= o for p, o in snap.log_offsets.items())),
                      None)
            if at is not None:
                visible.append((at - snap.time_millis / 1000) * 1000)
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        add_batch = [p["durationMs"].get("addBatch", 0) for p in progress]
        phases = sorted({k for p in progress for k in p["durationMs"]})
        durations = {k: float(np.median([p["durationMs"].get(k, 0) for p in progress])) for k in phases}
        return {"consistency": consistency, "rows_per_s": args.batches * args.rows / elapsed,
                "elapsed_s": elapsed, "addBatch_ms_median": float(np.median(add_batch)) if add_batch else None,
                "durations_ms_median": durations,
                "latency_ms_p50": float(np.percentile(latencies, 50)) if latencies else None,
                "latency_ms_p99": float(np.percentile(latencies, 99)) if latencies else None,
                "batches_seen": len(latencies), "snapshots": len(table.snapshots()),
                "visible_ms_p50": float(np.percentile(visible, 50)) if visible else None,
                "visible_ms_p99": float(np.percentile(visible, 99)) if visible else None}
    finally:
        stop.set()
        cat.drop_table("db.orders")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=1_000_000)
    parser.add_argument("--buckets", type=int, default=2)
    args = parser.parse_args()
    bootstrap = os.environ.get("TABLESTORE_BOOTSTRAP", "127.0.0.1:19092")
    spark = tablestore.spark.local_session("stream-bench")
    spark.sparkContext.setLogLevel("ERROR")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        # a warm-up pass, not reported: the session's first streaming write (Python workers, the JVM's JIT, the
        # first producers) would otherwise land in whichever case runs first
        warm = argparse.Namespace(batches=2, rows=10_000, keys=args.keys, buckets=args.buckets)
        _inputs(work / "warm" / "in", warm.batches, warm.rows, warm.keys)
        for consistency in ("transactional", "eventual"):
            _run(spark, work / "warm", consistency, warm, bootstrap)
        _inputs(work / "in", args.batches, args.rows, args.keys)
        for consistency in ("transactional", "eventual"):
            results.append(_run(spark, work, consistency, args, bootstrap))
    spark.stop()
    print(f"{'consistency':<14}{'rows/s':>10}{'addBatch ms':>13}{'latency p50 ms':>16}{'p99 ms':>9}")
    for r in results:
        print(f"{r['consistency']:<14}{r['rows_per_s']:>10.0f}{r['addBatch_ms_median'] or 0:>13.0f}"
              f"{r['latency_ms_p50'] or float('nan'):>16.0f}{r['latency_ms_p99'] or float('nan'):>9.0f}")
        print(f"  {r['consistency']} log visible after the snapshot (offset probe, 20 ms) p50 "
              f"{r['visible_ms_p50'] or float('nan'):.0f} ms, p99 {r['visible_ms_p99'] or float('nan'):.0f} ms")
        print(f"  {r['consistency']} median ms per micro-batch: {r['durations_ms_median']}")
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_stream.json").write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
