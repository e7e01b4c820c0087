"""SQL MERGE INTO a managed table against the same changes written as a `_row_kind` DataFrame (the floor: the
table's native upsert), same session, local[2].

    python bench/spark_merge_bench.py [--scale 1.0] [--repeat 10] [--buckets 2]

At --scale 1: a primary-key table of 1M rows (id, a, b, c) takes 500k changes: 30% updates of existing keys, 5%
deletes of existing keys, 65% inserts of new keys (a Parquet file, a temporary view `src` with a column `op`).
- merge: `MERGE INTO managed.bench.t t USING src s ON t.id = s.id WHEN MATCHED AND s.op = 'd' THEN DELETE
  WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *` (the join reads the target; the write gets +U,
  -D and +I rows; before 2026-11-28 a -U row too per update);
- floor: the same changes as `+U` / `-D` / `+I` rows of `src` written with `format("managed")` (no join, no old
  rows: what a writer that already knows the changes does);
- scan: the 1M-row target read whole into Spark's `noop` sink (what the MERGE's join reads); `join_s` = merge -
  floor - scan is what the MERGE adds beyond its write and its read (the join, the cardinality check);
- the join's floor: Spark's own cheapest form of the MERGE's join, the same rows with no table format in the way:
  the target as Parquet bucketed and sorted by `id` into as many buckets as the table (`bucketBy`: only the source
  is shuffled, the storage-partitioned join a MERGE could at best have), right outer joined with the source into
  `noop` (`bucketed_join`: Spark's choice, a sort-merge join; `bucketed_hash_join`: a shuffled hash join built on
  the source), less the source's own read (`src_scan`). `bound_{best,median}` = floor / (floor + the cheaper
  join - src_scan): the ratio a MERGE would reach whose join cost no more than that, and no cardinality
  check: above the target, a faster join could meet it; under it, no join in Spark can.
Each run into a fresh copy of the 1M-row table (made untimed before it); the runs of the kinds interleaved
(a b a b: the machine's load drifts); tables `write-only` (no compaction after the write, the same for both).
Prints best and median wall and CPU seconds (bench/proc_cpu.py: the driver, the JVM, its Python workers, the
catalog service) and the ratio floor / merge (target: at least 0.70); writes bench/out/spark_merge.json. Not a
test: figures depend on the machine's load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
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
HASH_HINT = "/*+ SHUFFLE_HASH(s) */"
"""The join hint of the join's floor built on the source (no sort), as the MERGE's own hash join is."""
MERGE = ("MERGE INTO managed.bench.t t USING src s ON t.id = s.id WHEN MATCHED AND s.op = 'd' THEN DELETE "
         "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")


def _rows(ids: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    return {"id": ids.astype(np.int64), "a": rng.integers(0, 1 << 40, len(ids)), "b": rng.random(len(ids)),
            "c": pa.array(np.char.add("v", (ids % 100_000).astype(str)))}


def data(table_rows: int, changes: int) -> tuple[pa.Table, pa.Table]:
    """The target's rows and the changes (30% updates, 5% deletes of existing keys, 65% new keys), shuffled."""
    rng = np.random.default_rng(23)
    target = pa.table(_rows(rng.permutation(table_rows), rng))
    existing = rng.choice(table_rows, int(changes * 0.35), replace=False)
    updates, deletes = existing[:int(changes * 0.30)], existing[int(changes * 0.30):]
    inserts = np.arange(table_rows, table_rows + changes - len(existing))
    ids = np.concatenate([updates, deletes, inserts])
    ops = np.array(["u"] * len(updates) + ["d"] * len(deletes) + ["i"] * len(inserts))
    order = rng.permutation(len(ids))
    source = pa.table({**_rows(ids[order], rng), "op": ops[order]})
    return target, source


def runs(repeat: int, timed: dict[str, Callable[[], Any]], before: Callable[[], Any]) -> dict[str, list[float]]:
    """Wall and CPU seconds of each run, the kinds interleaved, `before` untimed ahead of every run."""
    out: dict[str, list[float]] = {}
    for _ in range(repeat):
        for name, run in timed.items():
            before()
            start, start_cpu = time.perf_counter(), tree_cpu_s()
            run()
            out.setdefault(f"{name}_s", []).append(time.perf_counter() - start)
            out.setdefault(f"{name}_cpu_s", []).append(tree_cpu_s() - start_cpu)
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--scale", type=float, default=1.0, help="1.0: 1M table rows, 500k changes")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--buckets", type=int, default=2)
    args = ap.parse_args()
    table_rows, changes = int(1_000_000 * args.scale), int(500_000 * args.scale)
    work = Path(tempfile.mkdtemp(prefix="spark-merge-bench-"))
    try:
        target, source = data(table_rows, changes)
        pq.write_table(target, work / "target.parquet")
        pq.write_table(source, work / "src.parquet")
        warehouse = str(work / "wh")
        spark = tablestore.spark.local_session("spark-merge-bench", conf={
            "spark.sql.catalog.managed.warehouse": warehouse, "spark.sql.warehouse.dir": str(work / "spark-wh")})
        spark.sparkContext.setLogLevel("ERROR")
        spark.read.parquet(str(work / "target.parquet")).createOrReplaceTempView("base")
        src = spark.read.parquet(str(work / "src.parquet"))
        src.createOrReplaceTempView("src")
        changelog = src.selectExpr("CASE op WHEN 'u' THEN '+U' WHEN 'd' THEN '-D' ELSE '+I' END AS _row_kind",
                                   "id", "a", "b", "c")
        spark.sql("CREATE DATABASE managed.bench")

        def fresh() -> None:
            spark.sql("DROP TABLE IF EXISTS managed.bench.t")
            spark.sql("CREATE TABLE managed.bench.t (id BIGINT NOT NULL, a BIGINT, b DOUBLE, c STRING, "
                      f"PRIMARY KEY (id) NOT ENFORCED) TBLPROPERTIES ('bucket' = '{args.buckets}', "
                      "'write-only' = 'true')")
            spark.sql("INSERT INTO managed.bench.t SELECT * FROM base")

        def floor() -> None:
            changelog.write.format("managed").mode("append").option("warehouse", warehouse).save("bench.t")

        expected = table_rows + int(changes * 0.65) - int(changes * 0.05)
        fresh()   # warm-up: workers started, the JVM's paths compiled; both give the same table
        spark.sql(MERGE)
        merged = spark.sql("SELECT count(*) AS n, sum(a) AS a FROM managed.bench.t").first()
        fresh()
        floor()
        floored = spark.sql("SELECT count(*) AS n, sum(a) AS a FROM managed.bench.t").first()
        assert merged == floored and merged["n"] == expected, (merged, floored, expected)
        def scan() -> None:   # what any MERGE reads: the whole target, every column
            spark.table("managed.bench.t").write.format("noop").mode("overwrite").save()

        (spark.read.parquet(str(work / "target.parquet")).write.bucketBy(args.buckets, "id").sortBy("id")
         .mode("overwrite").saveAsTable("base_bucketed"))

        def join_sql(hint: str) -> str:
            return (f"SELECT {hint} s.op, t.id AS target_id, t.a AS target_a, s.id, s.a, s.b, s.c "
                    "FROM base_bucketed t RIGHT OUTER JOIN src s ON t.id = s.id")

        def join_plan(hint: str) -> str:
            plan = spark.sql(join_sql(hint))._jdf.queryExecution().executedPlan().toString()
            kind = ("broadcast" if "Broadcast" in plan else "sort-merge" if "SortMergeJoin" in plan
                    else "shuffled hash" if "ShuffledHashJoin" in plan else "other")
            return (f"{'bucketed' if 'Bucketed: true' in plan else 'unbucketed'} target scan, "
                    f"{plan.count('Exchange')} exchange(s), {kind} join")

        def bucketed_join() -> None:   # the MERGE's join at its cheapest in Spark (only the source shuffled)
            spark.sql(join_sql("")).write.format("noop").mode("overwrite").save()

        def bucketed_hash_join() -> None:   # the same, a hash table built on the source (no sort), as our MERGE's
            spark.sql(join_sql(HASH_HINT)).write.format("noop").mode("overwrite").save()

        def src_scan() -> None:
            src.write.format("noop").mode("overwrite").save()

        plans = {"bucketed_join_plan": join_plan(""), "bucketed_hash_join_plan": join_plan(HASH_HINT)}
        times = runs(args.repeat, {"merge": lambda: spark.sql(MERGE), "floor": floor, "scan": scan,
                                   "bucketed_join": bucketed_join, "bucketed_hash_join": bucketed_hash_join,
                                   "src_scan": src_scan}, fresh)
        spark.stop()
        report: dict[str, Any] = {"table_rows": table_rows, "changes": changes, "buckets": args.buckets,
                                  "repeat": args.repeat, **plans}
        for name, values in times.items():
            report[f"{name}_best"] = round(min(values), 3)
            report[f"{name}_median"] = round(statistics.median(values), 3)
        for stat in ("best", "median"):
            report[f"floor_vs_merge_{stat}"] = round(report[f"floor_s_{stat}"] / report[f"merge_s_{stat}"], 3)
            report[f"floor_vs_merge_cpu_{stat}"] = round(
                report[f"floor_cpu_s_{stat}"] / report[f"merge_cpu_s_{stat}"], 3)
            # the part of the MERGE that is neither its write nor its read of the target: the join, the check
            report[f"join_s_{stat}"] = round(
                report[f"merge_s_{stat}"] - report[f"floor_s_{stat}"] - report[f"scan_s_{stat}"], 3)
            # the ratio a MERGE that reads the whole target and adds nothing else would reach
            report[f"floor_vs_floor_plus_scan_{stat}"] = round(
                report[f"floor_s_{stat}"] / (report[f"floor_s_{stat}"] + report[f"scan_s_{stat}"]), 3)
            # the ratio a MERGE whose join cost what Spark's own cheaper bucketed join of the same rows costs would
            # reach
            join = min(report[f"bucketed_join_s_{stat}"], report[f"bucketed_hash_join_s_{stat}"])
            report[f"bound_{stat}"] = round(report[f"floor_s_{stat}"] / (
                report[f"floor_s_{stat}"] + join - report[f"src_scan_s_{stat}"]), 3)
        report["loadavg_end"] = round(os.getloadavg()[0], 1)
        for key, value in report.items():
            print(f"{key:32} {value}")
        OUT.mkdir(exist_ok=True)
        (OUT / "spark_merge.json").write_text(json.dumps(report, indent=2) + "\n")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
