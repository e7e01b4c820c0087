"""What publishing the Delta and Iceberg views adds to a commit (issue 49): p50/p99 latency of small upsert commits
into a table with deletion vectors, without views, with the Delta view, with the Iceberg view and with both, on
local files and on a real S3 server (SeaweedFS, tests/s3_server.py). The tables are written in turn, commit by
commit, so a burst of load on a shared machine hits every variant alike.

    .venv/bin/python bench/views_commit_bench.py [--commits 60] [--rows 1000] [--no-s3]

Each commit upserts `--rows` rows (half updates of keys already there, half new keys) into a table preloaded with
100k rows (bucket 2, deletion vectors on: the views are exact only with them); checkpoints of the Delta log fall
every 10 versions, so p99 includes them. Prints one table and writes bench/out/views_commit_bench.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

import s3_server  # noqa: E402

import tablestore  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string()), ("n", pa.int64())])
VARIANTS = {
    "no view": {},
    "delta": {"metadata.delta.enabled": "true"},
    "iceberg": {"metadata.iceberg.storage": "table-location"},
    "both": {"metadata.delta.enabled": "true", "metadata.iceberg.storage": "table-location"},
}
BASE = {"bucket": "2", "deletion-vectors.enabled": "true", "log.system": "none"}
PRELOAD = 100_000


def _rows(ids: np.ndarray, version: int) -> pa.Table:
    return pa.table({"id": ids, "v": [f"v{version}"] * len(ids), "n": np.full(len(ids), version)}, schema=SCHEMA)


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": 1000 * statistics.median(ordered),
            "p99_ms": 1000 * ordered[min(len(ordered) - 1, int(round(0.99 * (len(ordered) - 1))))],
            "mean_ms": 1000 * statistics.fmean(ordered)}


def measure(warehouse: str, options: dict[str, str], commits: int, rows: int) -> dict[str, dict[str, float]]:
    cat = tablestore.Catalog(warehouse, options=options)
    cat.create_database("db")
    tables = {}
    for i, (name, extra) in enumerate(VARIANTS.items()):
        t = cat.create_table(f"db.t{i}", SCHEMA, primary_key=["id"], options={**BASE, **extra})
        t.write(_rows(np.arange(PRELOAD), 0))
        tables[name] = t
    rng = np.random.default_rng(49)
    took: dict[str, list[float]] = {name: [] for name in VARIANTS}
    next_id = PRELOAD
    for c in range(commits + 3):   # the first 3: warm-up (imports, connections)
        ids = np.concatenate([rng.choice(next_id, rows // 2, replace=False), np.arange(next_id, next_id + rows // 2)])
        next_id += rows // 2
        batch = _rows(np.sort(ids), c + 1)
        for name, t in tables.items():
            began = time.perf_counter()
            t.write(batch)
            if c >= 3:
                took[name].append(time.perf_counter() - began)
    for name, t in tables.items():   # every variant holds the same rows
        assert t.read().num_rows == next_id, (name, t.read().num_rows, next_id)
    return {name: _percentiles(samples) for name, samples in took.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=60)
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--no-s3", action="store_true")
    args = parser.parse_args()
    results: dict[str, object] = {"commits": args.commits, "rows": args.rows}
    with tempfile.TemporaryDirectory() as tmp:
        results["local"] = measure(f"{tmp}/wh", {}, args.commits, args.rows)
    if not args.no_s3:
        with s3_server.running() as server:
            results["s3"] = measure(f"s3://{server.bucket}/bench-views", server.catalog_options(), args.commits,
                                    args.rows)
    print(f"{'warehouse':<10} {'variant':<9} {'p50':>9} {'p99':>9} {'p50 added':>10} {'p99 added':>10}")
    for where in ("local", "s3"):
        r = results.get(where)
        if not isinstance(r, dict):
            continue
        base = r["no view"]
        for name, p in r.items():
            print(f"{where:<10} {name:<9} {p['p50_ms']:>6.1f} ms {p['p99_ms']:>6.1f} ms "
                  f"{p['p50_ms'] - base['p50_ms']:>+7.1f} ms {p['p99_ms'] - base['p99_ms']:>+7.1f} ms")
    out = ROOT / "bench" / "out" / "views_commit_bench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
