"""Spark SQL through the `managed` catalog against the DataFrame path of the `managed` data source, same data,
same run, local[2] (issue 10: SQL within 10% of the DataFrame path).

    python bench/spark_sql_bench.py [--rows 2000000] [--buckets 2] [--repeat 3]

Measures (each the best of --repeat runs, the paths interleaved as the shared machine's load drifts):
- write: `INSERT INTO managed.db.t SELECT * FROM src` vs `df.write.format("managed").mode("append").save(...)`,
  each into a new primary-key table of the same options (created by SQL and by the Python catalog);
- read: `SELECT * FROM managed.db.t` -> noop sink vs `spark.read.format("managed").load("db.t")` -> noop, the same
  table.
Ratio = DataFrame time / SQL time (target >= 90%). Prints a table and writes bench/out/spark_sql.json. Needs the
SQL catalog (`tablestore.spark.session` configures `spark.sql.catalog.managed`). Not a test: figures depend on
the machine's load.
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

import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from spark_datasource_bench import SCHEMA, _data  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
DDL = """CREATE TABLE managed.db.{name} (id BIGINT NOT NULL, a BIGINT, b DOUBLE, c STRING, d INT,
  PRIMARY KEY (id) NOT ENFORCED) TBLPROPERTIES ('bucket' = '{buckets}', 'write-only' = 'true')"""


def _best(repeat: int, **runs: Callable[[], Any]) -> dict[str, float]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--buckets", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tablestore-sql-bench-"))
    wh = work / "wh"
    spark = tablestore.spark.session(str(wh), master="local[2]", **{
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.driver.memory": "4g"})
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
        df.createOrReplaceTempView("src")
        # warm-up: the first Python data source job of a session starts its Python workers
        spark.sql(DDL.format(name="warm", buckets=args.buckets))
        spark.sql("INSERT INTO managed.db.warm SELECT * FROM src LIMIT 1000")
        spark.sql("SELECT * FROM managed.db.warm").write.format("noop").mode("overwrite").save()

        def sql_write() -> None:
            spark.sql("DROP TABLE IF EXISTS managed.db.ws")
            spark.sql(DDL.format(name="ws", buckets=args.buckets))
            spark.sql("INSERT INTO managed.db.ws SELECT * FROM src")

        def df_write() -> None:
            cat.drop_table("db.wd", ignore_if_not_exists=True)
            cat.create_table("db.wd", SCHEMA, primary_key=["id"], options=opts)
            df.write.format("managed").mode("append").save("db.wd")

        results.update(_best(args.repeat, sql_write_s=sql_write, df_write_s=df_write))
        results["same_rows"] = (spark.sql("SELECT count(*) FROM managed.db.ws").first()[0]
                                == spark.read.format("managed").load("db.wd").count() == n)
        results.update(_best(
            args.repeat,
            sql_read_s=lambda: spark.sql("SELECT * FROM managed.db.wd").write.format("noop").mode("overwrite").save(),
            df_read_s=lambda: spark.read.format("managed").load("db.wd").write.format("noop").mode("overwrite")
            .save()))
    finally:
        results["loadavg_end"] = os.getloadavg()[0]
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    results["write_ratio"] = results["df_write_s"] / results["sql_write_s"]
    results["read_ratio"] = results["df_read_s"] / results["sql_read_s"]
    for key in ("write_ratio", "read_ratio"):
        print(f"{key:14s} {results[key]:6.1%}  (DataFrame time / SQL time; target >= 90%)")
    for key, value in results.items():
        if key.endswith("_s"):
            print(f"{key:14s} {value:8.2f} s   {n / value / 1e6:6.2f} M rows/s")
    print(f"same rows: {results['same_rows']}; load average {results['loadavg_start']:.1f} -> "
          f"{results['loadavg_end']:.1f}")
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_sql.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
