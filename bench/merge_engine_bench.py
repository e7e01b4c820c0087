"""Merge-engine read benchmark (not a test): each merge engine's read of a table whose buckets hold 5 sorted runs
(5 commits of `--rows`/5 rows each, `write-only`, so nothing compacts), against `deduplicate`'s read of the same
rows. Keys are drawn from `--rows`/2 ids, so most keys have records in several runs; a one-column int64 key, an
int64, a float64 and a string value column and an int64 `ts` (the sequence.field of the `seq-field` case).
Best of `--repeat` reads (a full scan: `Table.read()`), in rounds that read every case once; the ratio is deduplicate's time over the engine's (1.0:
as fast); `median` is the median over the rounds of that ratio within a round (steadier on a machine whose
load changes). The write column is the 5 commits' time (flushes merge with the engine too). `cpu` is the ratio of
the reads' best CPU seconds (this process, all threads): deduplicate's over the engine's, which a loaded machine
moves far less than wall time.

Prints a table and writes `bench/out/merge_engine.json`.

    .venv/bin/python bench/merge_engine_bench.py [--rows 1000000] [--repeat 3] [--engines deduplicate,...]
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

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int64()), ("price", pa.float64()),
                    ("name", pa.string()), ("ts", pa.int64())])
CASES: dict[str, dict[str, str]] = {
    "deduplicate": {},
    "seq-field": {"sequence.field": "ts"},
    "partial-update": {"merge-engine": "partial-update"},
    "aggregation": {"merge-engine": "aggregation", "fields.qty.aggregate-function": "sum",
                    "fields.price.aggregate-function": "max", "fields.ts.aggregate-function": "count"},
    "first-row": {"merge-engine": "first-row"},
}
RUNS = 5


def commits(rows: int, seed: int = 1) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    per = rows // RUNS
    out = []
    for _ in range(RUNS):
        ids = rng.integers(0, max(1, rows // 2), per)
        nulls = rng.random(per) < 0.3  # partial rows: some values missing
        out.append(pa.table({
            "id": ids, "qty": pa.array(rng.integers(0, 100, per), mask=nulls),
            "price": pa.array(rng.random(per), mask=rng.random(per) < 0.3),
            "name": pa.array(np.char.add("n", (ids % 1000).astype(str)), mask=rng.random(per) < 0.3),
            "ts": rng.integers(0, 1_000_000, per),
        }, schema=SCHEMA))
    return out


def build(case: str, data: list[pa.Table], warehouse: str) -> tuple[tablestore.Table, float]:
    """The case's table with the 5 commits written; the seconds the writes took."""
    cat = tablestore.Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(f"db.{case.replace('-', '_')}", schema=SCHEMA, primary_key=["id"],
                         options={"bucket": "2", "write-only": "true", **CASES[case]})
    began = time.perf_counter()
    for batch in data:
        t.write(batch)
    return t, time.perf_counter() - began


def bench(cases: list[str], data: list[pa.Table], repeat: int, warehouse: str) -> list[dict[str, object]]:
    """Reads in rounds, each reading every case once (a machine whose load changes affects all cases alike); each
    case's best read."""
    tables = {case: build(case, data, warehouse) for case in cases}
    times: dict[str, list[float]] = {case: [] for case in cases}
    cpu: dict[str, list[float]] = {case: [] for case in cases}
    rows_out = {}
    for _ in range(repeat):
        for case, (t, _) in tables.items():
            began, began_cpu = time.perf_counter(), time.process_time()
            rows_out[case] = t.read().num_rows
            times[case].append(time.perf_counter() - began)
            cpu[case].append(time.process_time() - began_cpu)
    base = times.get("deduplicate")
    base_cpu = min(cpu["deduplicate"]) if "deduplicate" in cpu else None
    return [{"case": case, "read_s": round(min(times[case]), 4), "write_s": round(tables[case][1], 3),
             "read_cpu_s": round(min(cpu[case]), 4),
             "cpu_ratio": None if base_cpu is None else round(base_cpu / min(cpu[case]), 2),
             "rows_out": rows_out[case], "rows_in": sum(b.num_rows for b in data),
             # the median over rounds of deduplicate's time over this case's in the same round: steadier than a
             # ratio of bests when the machine's load changes
             "median_round_ratio": None if base is None else round(float(np.median(
                 [b / t for b, t in zip(base, times[case])])), 2),
             "sorted_runs": _runs_per_bucket(tables[case][0].describe())} for case in cases]


def _runs_per_bucket(described: dict[str, object]) -> object:
    partitions = described.get("partitions")
    return partitions[0].get("sorted_runs") if isinstance(partitions, list) and partitions else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engines", default=",".join(CASES))
    parser.add_argument("--out", default=str(ROOT / "bench" / "out" / "merge_engine.json"))
    args = parser.parse_args()
    data = commits(args.rows)
    with tempfile.TemporaryDirectory() as warehouse:
        results = bench(args.engines.split(","), data, args.repeat, warehouse)
    base = next((r["read_s"] for r in results if r["case"] == "deduplicate"), None)
    print(f"{'case':>15} {'read s':>8} {'vs dedup':>9} {'median':>7} {'cpu':>5} {'write s':>8} {'rows out':>9}")
    for r in results:
        ratio = round(float(base) / float(r["read_s"]), 2) if base else None  # type: ignore[arg-type]
        r["ratio_vs_deduplicate"] = ratio
        print(f"{r['case']:>15} {r['read_s']:>8} {str(ratio):>9} {str(r['median_round_ratio']):>7} "
              f"{str(r['cpu_ratio']):>5} {r['write_s']:>8} {r['rows_out']:>9}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"rows": args.rows, "runs_per_bucket": RUNS, "results": results}, indent=2))


if __name__ == "__main__":
    main()
