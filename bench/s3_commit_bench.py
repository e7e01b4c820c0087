"""Commit latency on an S3 warehouse (a real S3 server: SeaweedFS, tests/s3_server.py) against local files: p50/p99
of N small commits by one writer, then the same with C concurrent committers (processes) on one table, where
commits race for snapshot ids and the losers retry on top of the winners.

    .venv/bin/python bench/s3_commit_bench.py [--commits 50] [--committers 4]

Prints one table and writes bench/out/s3_commit_bench.json.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import s3_server  # noqa: E402

import tablestore  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _commits(warehouse: str, options: dict[str, str], writer: int, commits: int) -> list[float]:
    """Seconds of each `Table.write` (one small commit: 10 rows, one snapshot) of one writer."""
    table = tablestore.Catalog(warehouse, options=options).get_table("db.t")
    took = []
    for n in range(commits):
        ids = [writer * 1_000_000 + n * 10 + i for i in range(10)]
        began = time.perf_counter()
        table.write(pa.table({"id": ids, "v": ["x"] * 10}, schema=SCHEMA))
        took.append(time.perf_counter() - began)
    return took


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": 1000 * statistics.median(ordered),
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))],
            "mean_ms": 1000 * statistics.fmean(ordered)}


def measure(warehouse: str, options: dict[str, str], commits: int, committers: int) -> dict[str, object]:
    cat = tablestore.Catalog(warehouse, options=options)
    cat.create_database("db")
    cat.create_table("db.t", SCHEMA, primary_key=["id"],
                     options={"bucket": "2", "write-only": "true", "commit.max-retries": "100"})
    _commits(warehouse, options, 0, 3)   # warm-up: imports, connections
    single = _commits(warehouse, options, 1, commits)
    began = time.perf_counter()
    with ProcessPoolExecutor(committers, mp_context=multiprocessing.get_context("spawn")) as pool:
        runs = list(pool.map(_commits, [warehouse] * committers, [options] * committers,
                             range(2, 2 + committers), [commits] * committers))
    wall = time.perf_counter() - began
    concurrent = [t for run in runs for t in run]
    appends = sum(1 for s in cat.get_table("db.t").snapshots() if s.kind == "APPEND")
    assert appends == 3 + commits + committers * commits, appends   # every commit landed once
    return {"single": _percentiles(single),
            "concurrent": {**_percentiles(concurrent), "committers": committers,
                           "commits_per_s": committers * commits / wall}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=50)
    parser.add_argument("--committers", type=int, default=4)
    args = parser.parse_args()
    results: dict[str, object] = {"commits": args.commits}
    with tempfile.TemporaryDirectory() as tmp:
        results["local"] = measure(f"{tmp}/wh", {}, args.commits, args.committers)
    with s3_server.running() as server:
        results["s3"] = measure(f"s3://{server.bucket}/bench-commit", server.catalog_options(), args.commits,
                                args.committers)
    print(f"{'warehouse':<10} {'1 writer p50':>13} {'p99':>9} {f'{args.committers} writers p50':>15} {'p99':>9} "
          f"{'commits/s':>10}")
    for name in ("local", "s3"):
        r = results[name]
        s, c = r["single"], r["concurrent"]  # type: ignore[index]
        print(f"{name:<10} {s['p50_ms']:>10.1f} ms {s['p99_ms']:>6.1f} ms {c['p50_ms']:>12.1f} ms "
              f"{c['p99_ms']:>6.1f} ms {c['commits_per_s']:>10.1f}")
    out = ROOT / "bench" / "out" / "s3_commit_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
