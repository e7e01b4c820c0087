"""Normalizing an upsert log (and the snapshot part of a `full` change scan): rows/s of the vectorised
`ArrowChangelogNormalizer` (what `Table.read_changes` uses) and of the per-row `ChangelogNormalizer` it replaced,
on the same generated data, in one run (not a test).

Workloads (8 columns: an int64 key, 3 int64, 2 float64, 2 strings; batches of `--batch` rows, as a log reader
yields them):
- snapshot: `--rows` distinct keys, all +I (the snapshot part of a `full` scan: every row is new state);
- upserts: `--rows` changes over `--rows`/2 keys, 30% updates of earlier keys, 5% deletes by key, 10% duplicates.
The per-row normalizer runs on the first `--reference-rows` rows only (it is ~100k rows/s). Prints one table,
writes `bench/out/changes_normalize.json`.

    .venv/bin/python bench/changes_normalize_bench.py [--rows N] [--batch B] [--reference-rows M]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from tablestore.materializer import ChangelogNormalizer  # noqa: E402
from tablestore.materializer.normalize_arrow import ArrowChangelogNormalizer  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("a", pa.int64()), ("b", pa.int64()), ("c", pa.int64()),
                    ("x", pa.float64()), ("y", pa.float64()), ("s", pa.string()), ("t", pa.string())])


def generate(rows: int, workload: str, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    if workload == "snapshot":
        ids = np.arange(rows, dtype=np.int64)
        kinds = np.full(rows, "+I", dtype=object)
    else:
        keys = max(1, rows // 2)
        ids = np.where(rng.random(rows) < 0.3, rng.integers(0, keys, rows), np.arange(rows) % keys).astype(np.int64)
        roll = rng.random(rows)
        kinds = np.where(roll < 0.05, "-D", "+U").astype(object)
        dup = roll > 0.9
        ids[1:][dup[1:]] = ids[:-1][dup[1:]]  # a duplicate of the previous change
    values = rng.integers(0, 1000, rows)
    return pa.table({
        "_row_kind": pa.array(kinds, pa.string()), "id": ids, "a": values, "b": values * 2, "c": ids % 97,
        "x": values / 7.0, "y": rng.random(rows), "s": pa.array([f"s{v}" for v in values % 50]),
        "t": pa.array(np.where(values % 3 == 0, None, "payload-text-" + (values % 11).astype(str)).tolist()),
    })


def run(table: pa.Table, batch: int, process: Callable[[pa.Table], pa.Table]) -> tuple[float, int]:
    started = time.perf_counter()
    emitted = 0
    for lo in range(0, table.num_rows, batch):
        emitted += process(table.slice(lo, batch)).num_rows
    return time.perf_counter() - started, emitted


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000)
    parser.add_argument("--reference-rows", type=int, default=100_000)
    args = parser.parse_args(argv)
    results: list[dict[str, Any]] = []
    print(f"{'workload':<10} {'normalizer':<24} {'rows':>10} {'seconds':>8} {'rows/s':>12}")
    for workload in ("snapshot", "upserts"):
        data = generate(args.rows, workload)
        arrow = ArrowChangelogNormalizer(SCHEMA, ["id"])
        per_row = ChangelogNormalizer(key=[0], row_types=SCHEMA.types)
        reference = data.slice(0, min(args.reference_rows, args.rows))
        figures = {}
        for name, table, process in (("vectorised (arrow)", data, arrow.process_batch),
                                     ("per-row (reference)", reference, per_row.process_batch)):
            seconds, emitted = run(table, args.batch, process)
            rate = table.num_rows / seconds
            figures[name] = rate
            print(f"{workload:<10} {name:<24} {table.num_rows:>10,} {seconds:>8.2f} {rate:>12,.0f}")
            results.append({"workload": workload, "normalizer": name, "rows": table.num_rows,
                            "emitted": emitted, "seconds": seconds, "rows_per_s": rate})
        print(f"{workload:<10} speed-up x{figures['vectorised (arrow)'] / figures['per-row (reference)']:.1f}")
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    (out / "changes_normalize.json").write_text(json.dumps({
        "args": vars(args), "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "results": results}, indent=2))
    print(f"wrote {out / 'changes_normalize.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
