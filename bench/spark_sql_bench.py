"""The SQL path (the `managed` catalog) against the DataFrame path (`format("managed")`), same rows, same run,
local[2].

    python bench/spark_sql_bench.py [--rows 2000000] [--buckets 2] [--repeat 2]

Measures (each the best of --repeat runs (the reads: at least 5), the runs of one kind interleaved, every other
round reversed (a b c c b a: the machine's load drifts), after a warm-up insert and read; each insert into a fresh
primary-key table):
- insert: `INSERT INTO managed.bench.t SELECT * FROM src` vs `src.write.format("managed").mode("append")`
  (src: a temporary view over a Parquet file); also the SQL insert of a key Spark knows is not null
  (`coalesce(id, 0L)`: no `AssertNotNull` in its plan, the one step the SQL plan has that the DataFrame's has not),
  and `distribute_by_bucket(src)` + the DataFrame write (its older equivalent);
- select: `SELECT * FROM managed.bench.t` -> noop sink vs `spark.read.format("managed").load(...)` -> noop
  (3 x --repeat rounds, at least 15: a read is short, so its ratio is noisier);
- plan: the same two reads planned, not run (statement to physical plan: parsing, `loadTable` or the source's
  lookup, optimisation, split planning), the median of 40 interleaved rounds: the fixed cost per statement that
  differs between the front doors, with no data read.
Target: the SQL path within 5% of the DataFrame path. Each ratio is given two ways: of the best times, and the
median over the rounds of the ratio within a round (`*_median`: the two runs of a round are adjacent, so they share
the machine's load; steadier than the best times on a shared machine). Prints a table and writes
bench/out/spark_sql.json. Not a test: figures depend on the machine's load.
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

import tablestore.spark  # noqa: E402
from proc_cpu import tree_cpu_s  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def _data(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    ids = rng.permutation(rows).astype(np.int64)
    return pa.table({"id": ids, "a": rng.integers(0, 1 << 40, rows), "b": rng.random(rows),
                     "c": pa.array(np.char.add("v", (ids % 100_000).astype(str)))})


def _best(repeat: int, **runs: Callable[[], Any]) -> dict[str, float]:
    """The best time of each run, the runs interleaved, every other round in reverse order (a b c c b a a b c ...):
    on a shared machine the load drifts over minutes, and the ratios compare runs made under the same load; the
    reversal keeps one kind from always following another (a heavy run's garbage collection lands in the next).
    `before_<name>`, when given, runs untimed before each run of <name>."""
    timed = {name: run for name, run in runs.items() if not name.startswith("before_")}
    times: dict[str, list[float]] = {name: [] for name in timed}
    cpu: dict[str, list[float]] = {name: [] for name in timed}
    for i in range(repeat):
        for name, run in (reversed(timed.items()) if i % 2 else timed.items()):
            runs.get(f"before_{name}", lambda: None)()
            start, start_cpu = time.perf_counter(), tree_cpu_s()
            run()
            times[name].append(time.perf_counter() - start)
            cpu[name].append(tree_cpu_s() - start_cpu)
    _ROUNDS.update(times)
    return {**{name: min(t) for name, t in times.items()},
            **{name.removesuffix("_s") + "_cpu_s": min(c) for name, c in cpu.items()}}


_ROUNDS: dict[str, list[float]] = {}
"""Every run's time of each kind, in round order (filled by `_best`)."""


def _median_ratio(theirs: str, ours: str) -> float:
    """The median over the rounds of `theirs`'s time / `ours`'s in the same round."""
    return round(float(np.median(np.array(_ROUNDS[theirs]) / np.array(_ROUNDS[ours]))), 3)


def _plan_ms(rounds: int = 40, **reads: Callable[[], Any]) -> dict[str, float]:
    """The median time (ms) from each read's statement to its physical plan, the reads interleaved (after two
    untimed rounds)."""
    times: dict[str, list[float]] = {name: [] for name in reads}
    for i in range(rounds + 2):
        for name, read in reads.items():
            start = time.perf_counter()
            read()._jdf.queryExecution().executedPlan()
            if i >= 2:
                times[name].append(time.perf_counter() - start)
    return {f"plan_{name}_ms": round(float(np.median(t)) * 1000, 1) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spark-sql-bench-"))
    try:
        source = work / "src.parquet"
        pq.write_table(_data(args.rows), source)
        warehouse = str(work / "wh")
        spark = tablestore.spark.local_session("spark-sql-bench", conf={
            "spark.sql.catalog.managed.warehouse": warehouse, "spark.sql.adaptive.enabled": "false"})
        spark.sparkContext.setLogLevel("ERROR")
        spark.read.parquet(str(source)).createOrReplaceTempView("src")
        spark.sql("CREATE DATABASE managed.bench")

        def fresh() -> None:
            spark.sql("DROP TABLE IF EXISTS managed.bench.t")
            spark.sql(f"CREATE TABLE managed.bench.t (id BIGINT NOT NULL, a BIGINT, b DOUBLE, c STRING, "
                      f"PRIMARY KEY (id) NOT ENFORCED) TBLPROPERTIES ('bucket' = '{args.buckets}')")

        src = spark.table("src")

        def select_sql() -> None:
            spark.sql("SELECT * FROM managed.bench.t").write.format("noop").mode("overwrite").save()

        def select_dataframe() -> None:
            (spark.read.format("managed").option("warehouse", warehouse).load("bench.t")
             .write.format("noop").mode("overwrite").save())

        # warm-up: the first write and read of a session start Python workers and compile the JVM's read path
        fresh()
        spark.sql("INSERT INTO managed.bench.t SELECT * FROM src LIMIT 1000")
        select_sql()
        select_dataframe()
        results = _best(
            args.repeat,
            before_insert_sql_s=fresh, before_insert_dataframe_s=fresh, before_insert_dataframe_by_bucket_s=fresh,
            insert_sql_s=lambda: spark.sql("INSERT INTO managed.bench.t SELECT * FROM src"),
            # the same with a key Spark knows is not null: no AssertNotNull row by row in the plan
            before_insert_sql_key_not_null_s=fresh,
            insert_sql_key_not_null_s=lambda: spark.sql(
                "INSERT INTO managed.bench.t SELECT coalesce(id, 0L) AS id, a, b, c FROM src"),
            insert_dataframe_s=lambda: src.write.format("managed").mode("append").option("warehouse", warehouse)
            .save("bench.t"),
            insert_dataframe_by_bucket_s=lambda: tablestore.spark.distribute_by_bucket(src, "bench.t").write
            .format("managed").mode("append").option("warehouse", warehouse).save("bench.t"))
        # the table stays as the last insert left it; the reads interleaved too, more rounds (they are short)
        results.update(_best(max(3 * args.repeat, 15), select_sql_s=select_sql, select_dataframe_s=select_dataframe))
        results.update(_plan_ms(
            sql=lambda: spark.sql("SELECT * FROM managed.bench.t"),
            dataframe=lambda: spark.read.format("managed").option("warehouse", warehouse).load("bench.t")))
        spark.stop()
        report = {"rows": args.rows, "buckets": args.buckets, **{k: round(v, 3) for k, v in results.items()},
                  "insert_sql_vs_dataframe": round(results["insert_dataframe_s"] / results["insert_sql_s"], 3),
                  "insert_sql_vs_dataframe_by_bucket": round(
                      results["insert_dataframe_by_bucket_s"] / results["insert_sql_s"], 3),
                  "select_sql_vs_dataframe": round(results["select_dataframe_s"] / results["select_sql_s"], 3),
                  "insert_sql_vs_dataframe_median": _median_ratio("insert_dataframe_s", "insert_sql_s"),
                  "insert_sql_vs_key_not_null_median": _median_ratio("insert_sql_key_not_null_s", "insert_sql_s"),
                  "select_sql_vs_dataframe_median": _median_ratio("select_dataframe_s", "select_sql_s"),
                  "insert_sql_vs_dataframe_cpu": round(results["insert_dataframe_cpu_s"] / results["insert_sql_cpu_s"], 3),
                  "select_sql_vs_dataframe_cpu": round(
                      results["select_dataframe_cpu_s"] / results["select_sql_cpu_s"], 3),
                  "plan_sql_minus_dataframe_ms": round(results["plan_sql_ms"] - results["plan_dataframe_ms"], 1),
                  "loadavg_end": round(os.getloadavg()[0], 1)}
        for key, value in report.items():
            print(f"{key:36} {value}")
        OUT.mkdir(exist_ok=True)
        (OUT / "spark_sql.json").write_text(json.dumps(report, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
