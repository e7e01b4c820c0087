"""Where a bulk insert's time goes (issue 8's bulk-insert target): 5M rows with keys in random order written by
plain pyarrow Parquet (snappy, zstd, zstd and lz4 with the file store's 64k row groups and no dictionary), the key
sort with its take, and tablestore with its default codec (lz4) and with snappy and zstd. One process, best of
`--repeat`; prints seconds, rows/s and the ratio to plain Parquet, writes bench/out/filestore_write_floor.json.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from filestore_bench import rows  # noqa: E402  (the same generator as the engine benchmark)


def best_of(repeat: int, step: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best


def _sort(data: pa.Table) -> None:
    data.take(pc.sort_indices(data, [("id", "ascending")]))


def tablestore_write(data: pa.Table, codec: str) -> Callable[[], None]:
    import tablestore

    def step() -> None:
        warehouse = tempfile.mkdtemp()
        try:
            cat = tablestore.Catalog(warehouse)
            cat.create_database("db")
            t = cat.create_table("db.t", schema=data.schema, primary_key=["id"],
                                 options={"bucket": "4", "file.compression": codec})
            t.write(data)
        finally:
            shutil.rmtree(warehouse, ignore_errors=True)
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", default=os.path.join(HERE, "out", "filestore_write_floor.json"))
    args = ap.parse_args()
    n = int(5_000_000 * args.scale)
    rng = np.random.default_rng(8)
    data = rows(rng.permutation(n).astype(np.int64), rng)  # keys in random order, as filestore_bench's bulk insert
    scratch = tempfile.mkdtemp()
    path = os.path.join(scratch, "f.parquet")
    steps: dict[str, Callable[[], None]] = {
        "parquet snappy": lambda: pq.write_table(data, path),
        "parquet zstd": lambda: pq.write_table(data, path, compression="zstd"),
        "parquet zstd, 64k row groups, no dictionary": lambda: pq.write_table(
            data, path, compression="zstd", row_group_size=65536, use_dictionary=False),
        "sort by key + take": lambda: _sort(data),
        "parquet lz4, 64k row groups, no dictionary": lambda: pq.write_table(
            data, path, compression="lz4", row_group_size=65536, use_dictionary=False),
        "tablestore lz4 (default)": tablestore_write(data, "lz4"),
        "tablestore snappy": tablestore_write(data, "snappy"),
        "tablestore zstd": tablestore_write(data, "zstd"),
    }
    seconds = {name: best_of(args.repeat, step) for name, step in steps.items()}
    shutil.rmtree(scratch, ignore_errors=True)
    base = seconds["parquet snappy"]
    for name, s in seconds.items():
        print(f"{name:45s} {s:6.2f} s {n / s / 1e3:9,.0f}k rows/s {base / s:6.2f}x plain Parquet")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"rows": n, "seconds": seconds}, f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
