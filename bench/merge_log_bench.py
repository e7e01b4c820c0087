"""What a log of merged changes costs a writer (not a test): a `partial-update` table with a Kafka log, whose log
holds the merged rows' changelog (tablestore.log_publish.log_changes: each bucket a commit touches merge-read
before and after the snapshot and compared by key), against a `deduplicate` table with a log (the records written
go to the log as they are) and against the same `partial-update` table without a log.

Each case: a table of `--rows` rows (one bulk commit, compacted), then `--commits` commits of `--changes` upserts
(keys drawn from the table's, a new value in one column, the others null: what a partial update is), through the
table API, `write-only` off (compaction as usual). The commits' rows/s per case, the cases interleaved commit by
commit (a b c a b c: the machine's load drifts), and the ratios against `deduplicate` with a log. Uses the project's
broker (`tablestore kafka start`, or it starts one). Prints a table and writes `bench/out/merge_log.json`.

    .venv/bin/python bench/merge_log_bench.py [--rows 1000000] [--changes 100000] [--commits 10] [--buckets 2]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

import tablestore  # noqa: E402
from logstore import broker  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int64()), ("price", pa.float64()),
                    ("name", pa.string())])
CASES: dict[str, dict[str, str]] = {
    "deduplicate, log": {},
    "partial-update, log": {"merge-engine": "partial-update"},
    "partial-update, no log": {"merge-engine": "partial-update", "log.system": "none"},
}


def _base(rows: int) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({"id": np.arange(rows, dtype=np.int64), "qty": rng.integers(0, 100, rows),
                     "price": rng.random(rows), "name": pa.array(np.char.add("n", (np.arange(rows) % 1000).astype(str)))},
                    schema=SCHEMA)


def _changes(rows: int, changes: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.choice(rows, changes, replace=False).astype(np.int64)
    return pa.table({"id": ids, "qty": rng.integers(0, 100, changes), "price": pa.nulls(changes, pa.float64()),
                     "name": pa.nulls(changes, pa.string())}, schema=SCHEMA)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--changes", type=int, default=100_000)
    ap.add_argument("--commits", type=int, default=10)
    ap.add_argument("--buckets", type=int, default=2)
    args = ap.parse_args()
    bootstrap = broker.status() or broker.start()
    cat = tablestore.Catalog(tempfile.mkdtemp(prefix="merge-log-bench-"),
                             options={"table-storage.log.properties.bootstrap.servers": bootstrap})
    cat.create_database("bench")
    tables = {}
    base = _base(args.rows)
    try:
        for i, (case, options) in enumerate(CASES.items()):
            t = cat.create_table(f"bench.t{i}", SCHEMA, primary_key=["id"],
                                 options={"bucket": str(args.buckets), **options})
            t.write(base)
            t.compact(full=True)
            tables[case] = t
        seconds: dict[str, list[float]] = {case: [] for case in CASES}
        for c in range(args.commits):
            batch = _changes(args.rows, args.changes, seed=100 + c)
            for case, t in tables.items():
                start = time.perf_counter()
                t.write(batch)
                seconds[case].append(time.perf_counter() - start)
        for case, t in tables.items():   # the answers: every case holds the same rows
            assert t.read().num_rows == args.rows, case
        floor = sum(seconds["deduplicate, log"])
        report = {"rows": args.rows, "changes": args.changes, "commits": args.commits, "buckets": args.buckets,
                  "cases": {case: {"seconds": round(sum(s), 3), "rows_per_s": round(args.changes * len(s) / sum(s)),
                                   "median_commit_s": round(float(np.median(s)), 3),
                                   "vs_deduplicate_log": round(floor / sum(s), 3)} for case, s in seconds.items()}}
        print(f"{args.commits} commits of {args.changes:,} partial updates into {args.rows:,} rows, "
              f"{args.buckets} buckets")
        print(f"{'case':24} {'seconds':>8} {'rows/s':>10} {'median commit':>14} {'vs deduplicate, log':>20}")
        for case, r in report["cases"].items():  # type: ignore[union-attr]
            print(f"{case:24} {r['seconds']:8.2f} {r['rows_per_s']:10,} {r['median_commit_s']:13.3f}s "
                  f"{r['vs_deduplicate_log']:20.2f}")
        out = ROOT / "bench" / "out"
        out.mkdir(exist_ok=True)
        (out / "merge_log.json").write_text(json.dumps(report, indent=2) + "\n")
    finally:
        for name in list(tables):
            cat.drop_table(tables[name].name)


if __name__ == "__main__":
    main()
