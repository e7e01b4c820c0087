"""Log store benchmark against the project's broker (not a test; `tablestore kafka start` first, or it starts it).

1. Produce throughput: `--rows` rows of 5 columns (int64 key, string, int32, float64, timestamp) through one
   table's LogWriter (encode + produce + flush + commit, from one Python process), per value format, in
   transactional and eventual consistency. Rows arrive in Arrow batches of `--batch` rows; best of `--repeat`.
2. End-to-end latency: `--writes` single-row writes through `Table.log_writer()` (file store + log), one every
   `--interval-ms`; each row carries its write time (ns); a `latest` reader in another process records arrival
   time minus write time. Eventual consistency (visible at once), and transactional with a commit every
   `--commit-interval-s` (visible at the commit). The writer's first write, which connects the producer, is
   reported apart (`first_write_ms`), as a raw client is measured after its connection.

Prints a table and writes `bench/out/logstore.json`.

    .venv/bin/python bench/logstore_bench.py [--rows 200000] [--writes 300] [--formats debezium-json,...]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import multiprocessing
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import tablestore  # noqa: E402
from filestore.bucket import bucket_of  # noqa: E402
from logstore import broker  # noqa: E402

FORMATS = ("debezium-json", "debezium-avro", "upsert")
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("qty", pa.int32()),
    pa.field("price", pa.float64()),
    pa.field("sent_ns", pa.int64()),
])
BUCKETS = 4


def make_rows(start: int, n: int) -> pa.Table:
    ids = np.arange(start, start + n, dtype=np.int64)
    return pa.table({
        "id": ids,
        "name": pa.array([f"customer-{i % 10_000:05d}" for i in range(start, start + n)]),
        "qty": (ids % 100).astype(np.int32),
        "price": ids * 0.25,
        "sent_ns": np.full(n, time.time_ns(), dtype=np.int64),
    }, schema=SCHEMA)


def catalog(bootstrap: str) -> tablestore.Catalog:
    cat = tablestore.Catalog(tempfile.mkdtemp(prefix="logbench-"),
                             options={"table-storage.log.properties.bootstrap.servers": bootstrap})
    cat.create_database("bench")
    return cat


def produce_throughput(cat: tablestore.Catalog, fmt: str, consistency: str, rows: int, batch: int, run: int
                       ) -> dict[str, Any]:
    name = f"bench.produce_{fmt.replace('-', '_')}_{consistency}_{run}"
    t = cat.create_table(name, SCHEMA, primary_key=["id"], options={
        "bucket": str(BUCKETS), "log.format": fmt, "log.consistency": consistency})
    log_store = t._handle.log
    assert log_store is not None
    batches = [make_rows(i, min(batch, rows - i)) for i in range(0, rows, batch)]
    buckets = [bucket_of(b, ["id"], BUCKETS) for b in batches]
    changes = [b.add_column(0, "_row_kind", pa.array(["+I"] * b.num_rows)) for b in batches]
    writer = log_store.new_writer(f"bench-{name}")
    writer._client()  # connect and init the transaction outside the timing
    started = time.perf_counter()
    sent = 0
    for c, bk in zip(changes, buckets):
        sent += writer.write(c, bk)
    writer.prepare()
    writer.commit()
    seconds = time.perf_counter() - started
    writer.close()
    cat.drop_table(name)
    return {"format": fmt, "consistency": consistency, "rows": sent, "seconds": round(seconds, 3),
            "rows_per_s": round(sent / seconds)}


def _reader_process(warehouse: str, bootstrap: str, name: str, writes: int, timeout_s: float,
                    ready: Any, out: Any) -> None:
    """Another process, as a consuming job would be: a `latest` reader timing each row's arrival."""
    t = tablestore.Catalog(warehouse, options={"table-storage.log.properties.bootstrap.servers": bootstrap}
                           ).get_table(name)
    # pinned here, before the writer starts; the records as stored: the log's own latency (normalizing looks up
    # the table at each range: bench/changes_microbatch_bench.py)
    changes = t.read_changes(scan="latest", timeout_s=timeout_s, normalize=False)
    ready.set()
    delays: list[float] = []
    first: list[float] = []
    for b in changes:
        now = time.time_ns()
        ms = (now - b.column("sent_ns").to_numpy()) / 1e6
        warmup = b.column("id").to_numpy() < 0
        first.extend(ms[warmup].tolist())
        delays.extend(ms[~warmup].tolist())
        if len(delays) >= writes:
            break
    out.put((first, delays))


def latency(cat: tablestore.Catalog, bootstrap: str, consistency: str, writes: int, interval_ms: float,
            commit_interval_s: float) -> dict[str, Any]:
    name = f"bench.latency_{consistency}"
    t = cat.create_table(name, SCHEMA, primary_key=["id"], options={
        "bucket": str(BUCKETS), "log.consistency": consistency})
    ctx = multiprocessing.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    reader = ctx.Process(target=_reader_process, args=(cat.warehouse, bootstrap, name, writes,
                                                       commit_interval_s + 5, ready, out))
    reader.start()
    if not ready.wait(60):
        raise RuntimeError("the reader process did not start")
    time.sleep(0.3)  # its consumer is assigned and fetching
    with t.log_writer() as w:
        # the first write connects the producer (and, transactional, inits its transactions): timed apart
        warm = make_rows(-1, 1).set_column(4, "sent_ns", pa.array([time.time_ns()], pa.int64()))
        w.write(warm)
        w.commit()
        time.sleep(0.3)
        last_commit = time.monotonic()
        for i in range(writes):
            row = make_rows(i, 1)
            row = row.set_column(4, "sent_ns", pa.array([time.time_ns()], pa.int64()))
            w.write(row)
            if time.monotonic() - last_commit >= commit_interval_s:
                w.commit()
                last_commit = time.monotonic()
            time.sleep(interval_ms / 1000)
        w.commit()
    first_ms, delays_ms = out.get(timeout=commit_interval_s + 60)
    reader.join(timeout=30)
    cat.drop_table(name)
    if not delays_ms:
        raise RuntimeError(f"{consistency}: the reader saw nothing")
    q = np.percentile(np.array(delays_ms), [50, 99])
    return {"consistency": consistency, "commit_interval_s": commit_interval_s, "writes": writes,
            "received": len(delays_ms), "p50_ms": round(float(q[0]), 1), "p99_ms": round(float(q[1]), 1),
            "max_ms": round(max(delays_ms), 1), "mean_ms": round(statistics.fmean(delays_ms), 1),
            "first_write_ms": round(first_ms[0], 1) if first_ms else None}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--formats", default=",".join(FORMATS))
    p.add_argument("--repeat", type=int, default=3, help="throughput: best of this many runs (the machine is shared)")
    p.add_argument("--writes", type=int, default=300)
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--commit-interval-s", type=float, default=1.0)
    p.add_argument("--out", default=str(ROOT / "bench" / "out" / "logstore.json"))
    args = p.parse_args()

    bootstrap = broker.status() or broker.start()
    cat = catalog(bootstrap)
    throughput = []
    for fmt in args.formats.split(","):
        for consistency in ("transactional", "eventual"):
            runs = [produce_throughput(cat, fmt, consistency, args.rows, args.batch, k) for k in range(args.repeat)]
            r = {**max(runs, key=lambda x: x["rows_per_s"]), "all_rows_per_s": [x["rows_per_s"] for x in runs]}
            throughput.append(r)
            print(f"produce  {fmt:<14} {consistency:<14} {r['rows']:>8} rows {r['seconds']:>7.2f} s "
                  f"{r['rows_per_s']:>10,} rows/s", flush=True)
    lat = []
    for consistency in ("eventual", "transactional"):
        interval = args.commit_interval_s
        r = latency(cat, bootstrap, consistency, args.writes, args.interval_ms, interval)
        lat.append(r)
        print(f"latency  {consistency:<14} commit every {interval:.1f} s  p50 {r['p50_ms']:>7.1f} ms  "
              f"p99 {r['p99_ms']:>7.1f} ms  max {r['max_ms']:>7.1f} ms  ({r['received']}/{r['writes']} rows; "
              f"first write, connecting: {r['first_write_ms']} ms)",
              flush=True)
    result = {
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "args": vars(args),
        "throughput": throughput,
        "latency": lat,
        "targets": {"eventual_p99_ms_below": 100, "debezium_json_rows_per_s_at_least": 100_000},
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
