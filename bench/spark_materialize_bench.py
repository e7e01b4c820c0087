"""Events/s of the in-job upsert materializer (the JVM flatMapGroupsWithState operator, RocksDB) against a
plain Spark stateful aggregation (`groupBy(key)` max/count, RocksDB) over the same stream of changelog files.

    .venv/bin/python bench/spark_materialize_bench.py [--events 1000000] [--keys 100000] [--files 10]

Prints a table and writes bench/out/spark_materialize.json. Not a test: figures depend on the machine.
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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tablestore.spark import local_session, upsert_materialize

sys.path.insert(0, str(Path(__file__).resolve().parent))
from changelog_source import ChangelogSource  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SCHEMA = "_row_kind string, id long, v string, seq long"


def make_changelog(directory: Path, events: int, keys: int, files: int, seed: int = 1) -> None:
    """Per key: +I, then -U/+U pairs; keys interleaved round-robin (each key's own order kept), 30% of the -U/+U
    pairs arriving +U first; written as `files` files in arrival order."""
    rng = np.random.default_rng(seed)
    per_key = max(3, events // keys)
    pairs = (per_key - 1) // 2
    pattern = ["+I"] + ["-U", "+U"] * pairs + ["-D"] * (per_key - 1 - 2 * pairs)
    versions = [0] + [v for j in range(1, pairs + 1) for v in (j - 1, j)] + [pairs] * (per_key - 1 - 2 * pairs)
    per_key = len(pattern)
    # round-robin: every key's event 0, then every key's event 1, ...
    k = np.array(pattern * keys, dtype=object).reshape(keys, per_key).T.reshape(-1)
    v = np.array(versions * keys, dtype=np.int64).reshape(keys, per_key).T.reshape(-1)
    ids = np.tile(np.arange(keys, dtype=np.int64), per_key)
    swap = np.flatnonzero((k[:-keys] == "-U") & (k[keys:] == "+U") & (rng.random(len(k) - keys) < 0.3))
    k[swap], k[swap + keys] = k[swap + keys], k[swap].copy()
    v[swap], v[swap + keys] = v[swap + keys], v[swap].copy()
    directory.mkdir(parents=True, exist_ok=True)
    size = -(-len(k) // files)
    for f in range(files):
        s = slice(f * size, (f + 1) * size)
        n = len(k[s])
        table = pa.table({
            "_row_kind": pa.array(k[s].tolist(), pa.string()), "id": pa.array(ids[s]),
            "v": pa.array([f"value-{x}" for x in v[s]], pa.string()),
            "seq": pa.array(np.arange(f * size, f * size + n)),
        })
        path = directory / f"part-{f:04d}.parquet"
        pq.write_table(table, path)
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))  # the file source's order = arrival order


def timed(spark: Any, build: Any, source: Path, checkpoint: Path, files_per_batch: int, kind: str) -> float:
    if kind in ("python", "python-rows"):
        stream = (spark.readStream.format("bench_changelog").option("path", str(source))
                  .option("filesPerBatch", files_per_batch).option("rows", str(kind == "python-rows").lower())
                  .load())
    else:
        stream = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", files_per_batch).parquet(str(source))
    query = build(stream).writeStream.format("noop").option("checkpointLocation", str(checkpoint))
    start = time.perf_counter()
    q = query.outputMode("update").trigger(availableNow=True).start()
    q.awaitTermination()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--files-per-batch", type=int, nargs="+", default=[10, 2],
                        help="micro-batch sizes to measure (files per trigger); 10 = the whole stream at once")
    parser.add_argument("--strategy", default="ADAPTIVE")
    parser.add_argument("--sources", nargs="+", default=["files", "python"],
                        help="files: Spark's Parquet file source; python: the same files through a Python data "
                             "source yielding Arrow batches; python-rows: yielding tuples (the reference's toy source)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spark-bench-"))
    try:
        make_changelog(work / "src", args.events, args.keys, args.files)
        make_changelog(work / "warm", 20_000, 2_000, 2, seed=2)
        events = sum(pq.read_metadata(p).num_rows for p in (work / "src").iterdir())
        # Spark's Python processes (workers, the streaming source runner) must import changelog_source
        here = str(Path(__file__).resolve().parent)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)
        spark = local_session("tablestore-bench")
        spark.sparkContext.setLogLevel("ERROR")
        from pyspark.sql import functions as F

        variants = {
            "upsert_materialize": lambda s: upsert_materialize(s, primary_key=["id"], strategy=args.strategy,
                                                               order_by="seq", output_mode="update"),
            "groupBy(id).agg": lambda s: s.groupBy("id").agg(F.max("seq").alias("seq"), F.count("*").alias("n")),
        }
        spark.dataSource.register(ChangelogSource)
        for source in args.sources:
            for name, build in variants.items():  # warm up JVM and Python workers on a small stream
                timed(spark, build, work / "warm", work / f"ck-warm-{name}-{source}", 1, source)
        runs = []
        for source in args.sources:
            for per_batch in args.files_per_batch:
                results = {}
                for name, build in variants.items():
                    seconds = timed(spark, build, work / "src", work / f"ck-{name}-{per_batch}-{source}", per_batch,
                                    source)
                    results[name] = {"seconds": round(seconds, 2), "events_per_s": round(events / seconds)}
                ratio = results["upsert_materialize"]["events_per_s"] / results["groupBy(id).agg"]["events_per_s"]
                runs.append({"source": source, "files_per_batch": per_batch,
                             "micro_batches": -(-args.files // per_batch), "results": results,
                             "ratio": round(ratio, 3)})
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{events:,} events over {args.keys:,} keys in {args.files} files, strategy {args.strategy}, "
          "local[2], RocksDB state store")
    print(f"{'source':<12}{'micro-batches':>13}  {'variant':<22}{'seconds':>10}{'events/s':>12}")
    for run in runs:
        for name, r in run["results"].items():
            print(f"{run['source']:<12}{run['micro_batches']:>13}  {name:<22}{r['seconds']:>10}{r['events_per_s']:>12,}")
        print(f"{'':<12}{'':>13}  materializer / aggregation = {run['ratio']:.0%} (target >= 50%)")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "spark_materialize.json").write_text(json.dumps(
        {"events": events, "keys": args.keys, "files": args.files, "strategy": args.strategy, "runs": runs},
        indent=2))


if __name__ == "__main__":
    main()
