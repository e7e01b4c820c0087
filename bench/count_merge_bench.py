"""Count-table merge benchmark (not a test): `filestore.merge.merge_counts` on `--rows` records of a table without a
primary key (whole-row key: int64 + string), with a share `--retract` of them retractions (-1), non-final (flush,
partial compaction) and final (read, full compaction). Inputs without retractions take the hash-sum path; with
retractions the sort-and-fold path of filestore.countmerge. Best of `--repeat`.

Prints a table and writes `bench/out/count_merge.json`.

    .venv/bin/python bench/count_merge_bench.py [--rows 1000000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402

from filestore.merge import COUNT, KIND, SEQ, merge_counts  # noqa: E402


def records(rows: int, retract: float, seed: int = 1) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({
        SEQ: np.arange(rows, dtype=np.int64),
        KIND: np.zeros(rows, dtype=np.int8),
        COUNT: rng.choice([1, -1], rows, p=[1 - retract, retract]).astype(np.int64),
        "a": rng.integers(0, max(1, rows // 5), rows),
        "b": pa.array(rng.integers(0, 5, rows).astype(str)),
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = []
    for retract in (0.0, 0.2):
        table = records(args.rows, retract)
        for final in (False, True):
            best = float("inf")
            for _ in range(args.repeat):
                began = time.perf_counter()
                out = merge_counts(table, ["a", "b"], final=final)
                best = min(best, time.perf_counter() - began)
            results.append({"rows": args.rows, "retract": retract, "final": final, "seconds": round(best, 4),
                            "rows_per_s": round(args.rows / best), "output_rows": out.num_rows})
    print(f"{'retract':>8} {'final':>6} {'seconds':>8} {'rows/s':>12} {'out rows':>9}")
    for r in results:
        print(f"{r['retract']:>8} {str(r['final']):>6} {r['seconds']:>8} {r['rows_per_s']:>12} {r['output_rows']:>9}")
    out_dir = ROOT / "bench" / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "count_merge.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
