"""Spark reads of a primary-key table with deletion vectors against the same table without them and against Spark's
own Parquet read of the same live rows (issue 49), one run, local[2].

    python bench/spark_dv_bench.py [--keys 1000000] [--batches 10] [--repeat 5]

The shape users have: 8 columns (`id` BIGINT key, two more BIGINTs, a DOUBLE, three STRINGs, a TIMESTAMP), `--keys`
keys preloaded, then `--batches` upsert batches of half as many rows (30% updates, 5% deletes, the rest new keys),
bucket 4, written through the Python API with the writer's own compaction (as a user gets it). Both tables get the
same batches. Then, each the best of `--repeat` runs, the three sources interleaved (a b c a b c: the load drifts):
- scan: every row into Spark's `noop` sink (`format("managed")`);
- aggregate: a SQL aggregate over every column (count, sum, max of each);
- range: the 1% key range `WHERE id BETWEEN lo AND hi`, collected;
- the same after a full compaction.
The first run of each (a cold query of the session) is reported too. Every answer is checked against the others
(count and a checksum). Prints a table and writes bench/out/spark_dv_bench.json. Not a test: figures depend on the
machine's load.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from peers_shapes import AGGREGATE, SCHEMA, batches  # noqa: E402  (the shape bench/spark_peers.py races too)

OUT = Path(__file__).resolve().parent / "out"


def best(repeat: int, runs: dict[str, Callable[[], Any]]) -> tuple[dict[str, float], dict[str, float], dict[str, Any]]:
    """(best seconds, first-run seconds, answer) per run, the runs interleaved."""
    times: dict[str, list[float]] = {k: [] for k in runs}
    answers: dict[str, Any] = {}
    for _ in range(repeat):
        for name, run in runs.items():
            began = time.perf_counter()
            answers[name] = run()
            times[name].append(time.perf_counter() - began)
    return {k: min(v) for k, v in times.items()}, {k: v[0] for k, v in times.items()}, answers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tablestore-dv-bench-"))
    cat = tablestore.Catalog(str(work / "wh"))
    cat.create_database("db")
    init, upserts = batches(args.keys, args.batches)
    tables = {}
    write_s: dict[str, float] = {}
    for name, dv in (("dv", "true"), ("merge", "false")):
        t = cat.create_table(f"db.{name}", SCHEMA, primary_key=["id"], options={
            "bucket": "4", "deletion-vectors.enabled": dv, "log.system": "none"})
        t.write(init)
        began = time.perf_counter()
        for b in upserts:
            t.write(b)
        write_s[name] = time.perf_counter() - began
        tables[name] = t
    live = tables["dv"].read()
    pq.write_table(live, work / "live.parquet")
    lo = int(pc.min(live.column("id")).as_py()) + live.num_rows // 2
    hi = lo + max(1, live.num_rows // 100)

    spark = tablestore.spark.session(str(work / "wh"), master="local[2]", **{
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.driver.memory": "4g"})
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(str(work / "live.parquet")).createOrReplaceTempView("parquet_live")
    # warm-up on other tables (the session's first jobs start Python workers and load the jar's classes): the
    # first run of each query below is then a user's first query of a table, not of the session
    warm = cat.create_table("db.warm", SCHEMA, primary_key=["id"], options={"deletion-vectors.enabled": "true",
                                                                            "log.system": "none"})
    warm.write(init.slice(0, 1000))
    warm.write(upserts[0].slice(0, 1000))
    pq.write_table(init.slice(0, 1000), work / "warm.parquet")
    for query in ("SELECT count(*) FROM managed.db.warm", f"SELECT count(*) FROM parquet.`{work / 'warm.parquet'}`"):
        spark.sql(query).collect()
    spark.read.format("managed").load("db.warm").write.format("noop").mode("overwrite").save()
    aggregate = AGGREGATE
    sources = {"dv": "managed.db.dv", "merge": "managed.db.merge", "parquet": "parquet_live"}

    def scan(src: str) -> Callable[[], Any]:
        if src == "parquet":
            return lambda: spark.table("parquet_live").write.format("noop").mode("overwrite").save()
        return lambda: spark.read.format("managed").load(sources[src].removeprefix("managed.")).write.format(
            "noop").mode("overwrite").save()

    def agg(src: str) -> Callable[[], Any]:
        return lambda: tuple(spark.sql(aggregate.format(sources[src])).collect()[0])

    def key_range(src: str) -> Callable[[], Any]:
        return lambda: spark.sql(f"SELECT sum(a), count(*) FROM {sources[src]} WHERE id BETWEEN {lo} AND {hi}"
                                 ).collect()[0][1]

    results: dict[str, Any] = {"keys": args.keys, "batches": args.batches, "live_rows": live.num_rows,
                               "spark": spark.version, "write_s": write_s, "loadavg_start": os.getloadavg()[0]}
    for phase in ("after upserts", "after full compaction"):
        if phase == "after full compaction":
            for t in tables.values():
                t.compact(full=True)
        for query, make in (("scan", scan), ("aggregate", agg), ("range", key_range)):
            runs = {src: make(src) for src in sources}
            fast, first, answers = best(args.repeat, runs)
            if query != "scan":
                assert answers["dv"] == answers["merge"] == answers["parquet"], (query, answers)
            results[f"{phase}: {query}"] = {"best_s": fast, "first_s": first}
    results["loadavg_end"] = os.getloadavg()[0]
    spark.stop()

    print(f"live rows {live.num_rows:,}; upserts written in {write_s['dv']:.1f} s with vectors, "
          f"{write_s['merge']:.1f} s without ({write_s['merge'] / write_s['dv']:.2f}x)")
    print(f"{'query':<36}{'dv':>9}{'merge':>9}{'parquet':>9}{'dv/merge':>10}{'dv/parquet':>11}{'first dv/m':>11}")
    for key, r in results.items():
        if not isinstance(r, dict) or "best_s" not in r:
            continue
        b, f = r["best_s"], r["first_s"]
        print(f"{key:<36}{b['dv']:>8.2f}s{b['merge']:>8.2f}s{b['parquet']:>8.2f}s{b['merge'] / b['dv']:>9.2f}x"
              f"{b['parquet'] / b['dv']:>10.2f}x{f['merge'] / f['dv']:>10.2f}x")
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_dv_bench.json").write_text(json.dumps(results, indent=2, default=str))
    print(f"wrote {OUT / 'spark_dv_bench.json'}")


if __name__ == "__main__":
    main()
