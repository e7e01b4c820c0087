"""The `managed` data source against Spark's own Parquet source, same data, same run, local[2].

    python bench/spark_datasource_bench.py [--rows 5000000] [--buckets 2]

Measures (each the best of --repeat runs, the runs compared interleaved: a b a b, as the machine's load drifts):
- write: the same DataFrame (read from a Parquet file) written with `format("managed")` into a primary-key table
  vs `df.write.parquet`, both lz4 (Parquet's LZ4_RAW; target: managed >= 50% of Parquet's rows/s); also the SQL
  catalog's `INSERT INTO managed.db.ws SELECT ...` (one writer per bucket: Spark clusters the rows by the table's
  bucket) and `distribute_by_bucket` + the DataFrame write (a Python pass and a shuffle more; `--no-by-bucket` skips it);
- read of a compacted table (one sorted run per bucket) -> noop sink vs Spark's Parquet read -> noop (>= 60%);
  and of one column of its five (`select("b")`: the raw splits read that column's chunks only), against Parquet's;
- read of a table with 5 sorted runs per bucket (5 writes of overlapping keys, never compacted) (>= 35%).
Prints a table and writes bench/out/spark_datasource.json. Not a test: figures depend on the machine's load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from proc_cpu import tree_cpu_s  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int64()), ("b", pa.float64()), ("c", pa.string()),
                    ("d", pa.int32())])


def _data(rows: int, seed: int, key_space: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    ids = rng.permutation(key_space)[:rows].astype(np.int64) if key_space >= rows else rng.integers(0, key_space, rows)
    return pa.table({"id": ids, "a": rng.integers(0, 1 << 40, rows), "b": rng.random(rows),
                     "c": pa.array(np.char.add("v", (ids % 100_000).astype(str))),
                     "d": rng.integers(0, 1000, rows).astype(np.int32)}, schema=SCHEMA)


def _best(repeat: int, **runs: Callable[[], Any]) -> dict[str, float]:
    """The best time of each run, the runs interleaved (a b c a b c ...): on a shared machine the load drifts over
    minutes, and the ratios compare runs made under the same load."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start, start_cpu = time.perf_counter(), tree_cpu_s()
            run()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(tree_cpu_s() - start_cpu)
    return {**{name: min(t) for name, t in times.items()},
            **{name.removesuffix("_s") + "_cpu_s": min(c) for name, c in cpu.items()}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-by-bucket", action="store_true", help="skip the distribute_by_bucket write")
    ap.add_argument("--no-read", action="store_true", help="measure the writes only")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tablestore-spark-bench-"))
    wh = work / "wh"
    spark = tablestore.spark.session(str(wh), master="local[2]", **{
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.driver.memory": "4g",
        # the same codec as the managed table's default (file.compression = lz4, Parquet's LZ4_RAW)
        "spark.sql.parquet.compression.codec": "lz4_raw"})
    spark.sparkContext.setLogLevel("ERROR")
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    opts = {"bucket": str(args.buckets), "write-only": "true"}
    n = args.rows
    results: dict[str, Any] = {"rows": n, "buckets": args.buckets, "spark": spark.version,
                               "loadavg_start": os.getloadavg()[0]}
    try:
        source = work / "source.parquet"
        pq.write_table(_data(n, 1, n), source, row_group_size=1 << 20)
        df = spark.read.parquet(str(source)).repartition(2).cache()
        df.count()
        # warm-up: the first Python data source job of a session starts its Python workers (2-3 s)
        cat.create_table("db.warm", SCHEMA, primary_key=["id"], options=opts)
        df.limit(1000).write.format("managed").mode("append").save("db.warm")
        spark.read.format("managed").load("db.warm").write.format("noop").mode("overwrite").save()

        # -- write
        def parquet_write() -> None:
            shutil.rmtree(work / "pq", ignore_errors=True)
            df.write.parquet(str(work / "pq"))

        def managed_write() -> None:
            cat.drop_table("db.w", ignore_if_not_exists=True)
            cat.create_table("db.w", SCHEMA, primary_key=["id"], options=opts)
            df.write.format("managed").mode("append").save("db.w")

        def managed_write_by_bucket() -> None:
            cat.drop_table("db.wb", ignore_if_not_exists=True)
            cat.create_table("db.wb", SCHEMA, primary_key=["id"], options=opts)
            tablestore.spark.distribute_by_bucket(df, "db.wb").write.format("managed").mode("append").save("db.wb")

        df.createOrReplaceTempView("bench_source")

        def managed_write_sql() -> None:
            # the SQL catalog's write: one writer per bucket (Spark clusters the rows by the table's bucket)
            cat.drop_table("db.ws", ignore_if_not_exists=True)
            cat.create_table("db.ws", SCHEMA, primary_key=["id"], options=opts)
            spark.sql("INSERT INTO managed.db.ws SELECT * FROM bench_source")

        writes = {"parquet_write_s": parquet_write, "managed_write_s": managed_write,
                  "managed_write_sql_s": managed_write_sql}
        if not args.no_by_bucket:
            writes["managed_write_by_bucket_s"] = managed_write_by_bucket
        results.update(_best(args.repeat, **writes))

        if not args.no_read:
            # -- read of a compacted table
            compacted = cat.get_table("db.w")
            compacted.compact(full=True)
            results["compacted_files"] = len(compacted.files())
            # -- read of a table with 5 sorted runs per bucket (5 writes of n/5 rows over the same key space)
            runs5 = cat.create_table("db.r5", SCHEMA, primary_key=["id"], options=opts)
            for i in range(5):
                runs5.write(_data(n // 5, 10 + i, n))
            results["runs5_files"] = len(runs5.files())
            results.update(_best(
                args.repeat,
                parquet_read_s=lambda: spark.read.parquet(str(work / "pq")).write.format("noop").mode("overwrite").save(),
                managed_read_compacted_s=lambda: spark.read.format("managed").load("db.w")
                .write.format("noop").mode("overwrite").save(),
                managed_read_5runs_s=lambda: spark.read.format("managed").load("db.r5")
                .write.format("noop").mode("overwrite").save(),
                parquet_read_column_s=lambda: spark.read.parquet(str(work / "pq")).select("b")
                .write.format("noop").mode("overwrite").save(),
                managed_read_column_s=lambda: spark.read.format("managed").load("db.w").select("b")
                .write.format("noop").mode("overwrite").save()))
    finally:
        results["loadavg_end"] = os.getloadavg()[0]
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    ratios = [("write_ratio", "parquet_write_s", "managed_write_s", 0.5),
              ("write_sql_ratio", "parquet_write_s", "managed_write_sql_s", 0.5),
              ("write_by_bucket_ratio", "parquet_write_s", "managed_write_by_bucket_s", 0.5),
              ("read_compacted_ratio", "parquet_read_s", "managed_read_compacted_s", 0.6),
              ("read_5runs_ratio", "parquet_read_s", "managed_read_5runs_s", 0.35),
              ("read_column_ratio", "parquet_read_column_s", "managed_read_column_s", 0.6)]
    for key, base, measured, target in ratios:
        if base in results and measured in results:
            results[key] = results[base] / results[measured]
            print(f"{key:24s} {results[key]:6.1%}  (target {target:.0%})")
    for key, base, measured, _ in ratios:
        base_cpu, measured_cpu = base.removesuffix("_s") + "_cpu_s", measured.removesuffix("_s") + "_cpu_s"
        if base_cpu in results and measured_cpu in results:
            results[key.replace("_ratio", "_cpu_ratio")] = results[base_cpu] / results[measured_cpu]
            print(f"{key.replace('_ratio', '_cpu_ratio'):24s} {results[key.replace('_ratio', '_cpu_ratio')]:6.1%}"
                  "  (CPU seconds of all processes)")
    for key, value in results.items():
        if key.endswith("_cpu_s"):
            print(f"{key:24s} {value:8.2f} s CPU")
        elif key.endswith("_s"):
            print(f"{key:24s} {value:8.2f} s   {n / value / 1e6:6.2f} M rows/s")
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_datasource.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
