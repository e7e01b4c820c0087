"""The floor of the `managed` data source's write (issue 9's write target: >= 50% of Spark's Parquet write), local[2].

    python bench/spark_write_floor.py [--rows 5000000] [--repeat 3]

One writer per bucket (the issue's own rule) makes the write a shuffle by the table's bucket, then a hand-over of
each bucket's rows to Python as Arrow, then the file store's writer. This measures the plans that stop short of
it, on the same cached DataFrame as bench/spark_datasource_bench.py, each the best of --repeat (interleaved):
- Spark's Parquet write (the target's baseline);
- the shuffle alone (`repartition(2, id)` -> noop sink);
- the shuffle plus the Arrow hand-over to a Python worker that drops the rows (`mapInArrow`), 100k-row batches as
  the managed write uses: what any Python-side writer costs before it writes anything;
- the shuffle plus Spark's Parquet write, unsorted (the ceiling of a JVM-side writer: it would still sort);
- the shuffle plus Spark's own sort and Parquet write (a JVM-side writer that sorts as Spark does);
- the managed write itself: by the JVM writer (tablestore/spark/jvm_write.py: the default where it applies, as
  here) and by the Python writer (`jvm-writer=false`).
Prints wall and CPU seconds (of every process of the run) and each one's ratio to Parquet's; writes
bench/out/spark_write_floor.json. Not a test: figures depend on the machine's load.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from spark_datasource_bench import SCHEMA, OUT, _best, _data  # noqa: E402


def _drop(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for batch in batches:
        yield batch.slice(0, 0)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tablestore-spark-floor-"))
    wh = work / "wh"
    spark = tablestore.spark.session(str(wh), master="local[2]", **{
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.driver.memory": "4g",
        "spark.sql.parquet.compression.codec": "lz4_raw",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "100000"})
    spark.sparkContext.setLogLevel("ERROR")
    cat = tablestore.Catalog(str(wh))
    cat.create_database("db")
    results: dict[str, Any] = {"rows": args.rows, "spark": spark.version}
    try:
        pq.write_table(_data(args.rows, 1, args.rows), work / "source.parquet", row_group_size=1 << 20)
        df = spark.read.parquet(str(work / "source.parquet")).repartition(2).cache()
        df.count()
        written = [0]

        def managed(jvm: bool = True) -> None:
            written[0] += 1
            name = f"db.w{written[0]}"
            cat.create_table(name, SCHEMA, primary_key=["id"], options={"bucket": "2", "write-only": "true"})
            df.write.format("managed").option("jvm-writer", str(jvm).lower()).mode("append").save(name)

        managed()  # warm-up: the first Python job of a session starts its workers
        results.update(_best(
            args.repeat,
            parquet_write_s=lambda: df.write.mode("overwrite").parquet(str(work / "pq")),
            shuffle_s=lambda: df.repartition(2, "id").write.format("noop").mode("overwrite").save(),
            shuffle_arrow_to_python_s=lambda: df.repartition(2, "id").mapInArrow(_drop, df.schema)
            .write.format("noop").mode("overwrite").save(),
            shuffle_parquet_s=lambda: df.repartition(2, "id").write.mode("overwrite").parquet(str(work / "unsorted")),
            shuffle_sort_parquet_s=lambda: df.repartition(2, "id").sortWithinPartitions("id")
            .write.mode("overwrite").parquet(str(work / "sorted")),
            managed_write_s=managed,
            managed_python_write_s=lambda: managed(jvm=False)))
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    base, base_cpu = results["parquet_write_s"], results["parquet_write_cpu_s"]
    for key in ("parquet_write_s", "shuffle_s", "shuffle_arrow_to_python_s", "shuffle_parquet_s",
                "shuffle_sort_parquet_s", "managed_write_s", "managed_python_write_s"):
        cpu = results[key.removesuffix("_s") + "_cpu_s"]
        results[key.removesuffix("_s") + "_ratio"] = base / results[key]
        print(f"{key:28s} {results[key]:6.2f} s  {base / results[key]:6.1%} of Parquet's speed   "
              f"CPU {cpu:6.2f} s  {base_cpu / cpu:6.1%}")
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_write_floor.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
