"""Managed tables on S3 against Spark's own Parquet on the same bucket: one run, one local[2] session (issue 21).

    python bench/s3_bench.py [--rows 2000000] [--repeat 2] [--cluster]

`--cluster` runs the same on a Spark standalone cluster instead of local[2] (tests/spark_cluster.py: a master and
two one-core workers, executors in JVMs of their own; the S3A jars at the driver's paths) and writes
bench/out/s3_bench_cluster.json.

The S3 server is SeaweedFS on this machine (tests/s3_server.py, started and stopped here); the session is
`tablestore.spark.session(warehouse="s3://...")` with the catalog's S3 options, so it has Hadoop's S3A
(tablestore/spark/s3a.py) and the JVM paths run on S3. On the same cached DataFrame (SCHEMA of
bench/spark_datasource_bench.py; read from a local Parquet file), each the best of --repeat, the runs interleaved:
- write: `df.write.format("managed")` into a new primary-key table of 2 buckets (the JVM writer) vs Spark's
  `df.write.parquet("s3a://...")` (its default file committer: task and job commits rename in the bucket), both
  lz4 (Parquet's LZ4_RAW); also the Python writer (`jvm-writer=false`); target: managed >= 50% of Parquet's rows/s;
- scan: `count(*)` and `sum(a)` of each written table: the managed table's splits through Spark's Parquet reader on
  s3a:// (the raw-split reader: one sorted run per bucket) vs `spark.read.parquet`; also the same scan through the
  Python reader (an exact pushed filter `id >= 0`, true of every row, sends every split to Python); target: >= 60%.
  Both read only column `a` (column pruning: the managed scan's raw splits read that column's chunks, its Python
  splits are read whole and projected); the same three also read every column into Spark's `noop` sink (read).
Prints seconds, rows/s and the ratio to Spark's Parquet; writes bench/out/s3_bench.json. Not a test: the figures
depend on the machine's load (the S3 server shares its 2 cores).
"""
from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))

import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from s3_server import running  # noqa: E402
import spark_cluster  # noqa: E402
from spark_datasource_bench import OUT, SCHEMA, _best, _data  # noqa: E402
from tablestore.spark.s3a import jvm_has_s3a  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cluster", action="store_true", help="on a standalone cluster instead of local[2]")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tablestore-s3-bench-"))
    results: dict[str, Any] = {"rows": args.rows, "repeat": args.repeat,
                               "master": "standalone cluster, 2 one-core workers" if args.cluster else "local[2]"}
    cluster = spark_cluster.running() if args.cluster else None
    try:
        with running() as server, (cluster or _nothing()) as found:
            options = server.catalog_options()
            warehouse = f"s3://{server.bucket}/wh"
            master = found.master_url if found is not None else "local[2]"
            on_cluster = {"spark.executor.memory": "1g", "spark.tablestore.s3a.ship": "false"} if found else {}
            spark = tablestore.spark.session(warehouse, master=master, **{
                **on_cluster,
                "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.driver.memory": "4g",
                "spark.sql.parquet.compression.codec": "lz4_raw",
                "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
                **{f"spark.sql.catalog.managed.{k}": v for k, v in options.items()}})
            spark.sparkContext.setLogLevel("ERROR")
            results.update(spark=spark.version, s3a=jvm_has_s3a(spark))
            try:
                results.update(_run(spark, warehouse, options, server.bucket, work, args))
            finally:
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _report(results, "s3_bench_cluster.json" if args.cluster else "s3_bench.json")


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield None


def _run(spark: Any, warehouse: str, options: dict[str, str], bucket: str, work: Path,
         args: argparse.Namespace) -> dict[str, Any]:
    catalog = tablestore.Catalog(warehouse, options=options)
    catalog.create_database("db")
    pq.write_table(_data(args.rows, 1, args.rows), work / "source.parquet", row_group_size=1 << 20)
    df = spark.read.parquet(str(work / "source.parquet")).repartition(2).cache()
    df.count()
    parquet = f"s3a://{bucket}/parquet"
    written: list[str] = []

    def managed(jvm: bool = True) -> None:
        name = f"db.w{len(written)}"
        written.append(name)
        catalog.create_table(name, SCHEMA, primary_key=["id"], options={"bucket": "2"})
        df.write.format("managed").option("jvm-writer", str(jvm).lower()).mode("append").save(name)

    def scan(frame: Any) -> None:
        [(count, total)] = [tuple(r) for r in frame.selectExpr("count(*)", "sum(a)").collect()]
        assert count == args.rows, (count, args.rows)

    def noop(frame: Any) -> None:
        frame.write.format("noop").mode("overwrite").save()

    managed()   # warm-up: the first Python job of a session starts its workers; S3A opens its client
    df.write.mode("overwrite").parquet(parquet)
    out = _best(args.repeat,
                parquet_write_s=lambda: df.write.mode("overwrite").parquet(parquet),
                managed_write_s=managed,
                managed_python_write_s=lambda: managed(jvm=False))
    table = written[1]   # written by the JVM writer: one sorted run per bucket
    raw = spark.read.format("managed").load(table)
    out["managed_scan_raw"] = "ColumnarToRow" in raw._jdf.queryExecution().executedPlan().toString()
    out.update(_best(args.repeat,
                     parquet_scan_s=lambda: scan(spark.read.parquet(parquet)),
                     managed_scan_s=lambda: scan(spark.read.format("managed").load(table)),
                     managed_python_scan_s=lambda: scan(spark.read.format("managed").load(table).filter("id >= 0")),
                     parquet_read_s=lambda: noop(spark.read.parquet(parquet)),
                     managed_read_s=lambda: noop(spark.read.format("managed").load(table)),
                     managed_python_read_s=lambda: noop(spark.read.format("managed").load(table).filter("id >= 0"))))
    return out


def _report(results: dict[str, Any], name: str) -> None:
    rows = results["rows"]
    print(f"{rows:,} rows, PySpark {results['spark']}, {results['master']}, SeaweedFS on the same machine, "
          f"S3A in the JVM: {results['s3a']}, managed scan through Spark's Parquet reader: "
          f"{results['managed_scan_raw']}")
    print(f"{'':26s} {'seconds':>8s} {'rows/s':>12s} {'of Parquet':>11s} {'CPU s':>7s}")
    for kind in ("write", "scan", "read"):
        base = results[f"parquet_{kind}_s"]
        for case in (f"parquet_{kind}", f"managed_{kind}", f"managed_python_{kind}"):
            seconds = results[f"{case}_s"]
            results[f"{case}_rows_per_s"] = rows / seconds
            results[f"{case}_ratio"] = base / seconds
            print(f"{case:26s} {seconds:8.2f} {rows / seconds:12,.0f} {base / seconds:11.1%} "
                  f"{results[f'{case}_cpu_s']:7.2f}")
    print(f"targets: write >= 50% of Parquet's ({results['managed_write_ratio']:.0%}), "
          f"scan >= 60% ({results['managed_scan_ratio']:.0%})")
    OUT.mkdir(exist_ok=True)
    (OUT / name).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
