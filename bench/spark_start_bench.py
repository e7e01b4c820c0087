"""How long a Spark job with managed tables takes to start, against a plain SparkSession with Paimon's jar.

    python bench/spark_start_bench.py [--runs 3]

Each run is a fresh Python process (what a user's job is), the variants interleaved (a b a b: the machine's load
drifts), on PySpark 4.1.2 (`.venv-spark-4.1.2`, made by bench/spark_peers.py's set-up; Paimon's jar from
scripts/paimon/build.py) with the tablestore jar already built (a warm machine):
- session: from the process's first import to a session that has run `spark.range(1).count()`, for
  `tablestore.spark.local_session()` and for `SparkSession.builder` with Paimon's jar, catalog and extension;
- first micro-batch: in the tablestore process, from `writeStream...start()` of a streaming upsert write into a
  managed table (a Parquet file source, one file per trigger) to its first micro-batch committed (the query's first
  progress), and the same for the rows of a `_row_kind` stream.
Targets (issue 22): the session within 10% of Paimon's; the first micro-batch within 5 s of start(). Prints the
medians and writes bench/out/spark_start.json.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
PYTHON = ROOT / ".venv-spark-4.1.2" / "bin" / "python"

CHILD = r'''
import time, sys, json, os, tempfile
t0 = time.perf_counter()
variant, jar = sys.argv[1], sys.argv[2]
out = {}
if variant == "paimon":
    from pyspark.sql import SparkSession
    wh = tempfile.mkdtemp()
    spark = (SparkSession.builder.master("local[2]").appName("start-paimon")
             .config("spark.jars", jar).config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.sql.catalog.paimon", "org.apache.paimon.spark.SparkCatalog")
             .config("spark.sql.catalog.paimon.warehouse", "file:" + wh)
             .config("spark.sql.extensions", "org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions")
             .getOrCreate())
    spark.range(1).count()
    out["session_s"] = time.perf_counter() - t0
else:
    import pyarrow as pa, pyarrow.parquet as pq
    import tablestore.spark
    wh = tempfile.mkdtemp()
    spark = tablestore.spark.local_session("start-tablestore", conf={"spark.sql.catalog.managed.warehouse": wh})
    spark.range(1).count()
    out["session_s"] = time.perf_counter() - t0
    spark.sparkContext.setLogLevel("ERROR")
    src = os.path.join(wh, "src")
    os.makedirs(src)
    for i in range(3):
        pq.write_table(pa.table({"id": pa.array(range(i * 1000, (i + 1) * 1000), pa.int64()),
                                 "v": pa.array([f"v{i}"] * 1000), "op": pa.array(["+I"] * 1000)}),
                       os.path.join(src, f"part-{i}.parquet"))
    spark.sql("CREATE DATABASE managed.s")
    spark.sql("CREATE TABLE managed.s.t (id BIGINT NOT NULL, v STRING) TBLPROPERTIES ('primary-key' = 'id')")
    stream = (spark.readStream.schema("id BIGINT, v STRING, op STRING").option("maxFilesPerTrigger", 1)
              .parquet(src).withColumnRenamed("op", "_row_kind"))
    start = time.perf_counter()
    query = (stream.writeStream.format("managed").option("checkpointLocation", os.path.join(wh, "ck"))
             .start("s.t"))
    while query.lastProgress is None:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.02)
    out["first_micro_batch_s"] = time.perf_counter() - start
    query.stop()
print("RESULT " + json.dumps(out))
'''


def _once(variant: str, jar: str) -> dict[str, float]:
    done = subprocess.run([str(PYTHON), "-c", CHILD, variant, jar], capture_output=True, text=True, cwd=ROOT)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "scripts" / "paimon"))
    from build import jar_path   # type: ignore[import-not-found]

    jar = str(jar_path())
    subprocess.run([str(PYTHON), "-c", "from tablestore.spark import jar; jar.jar_path()"], check=True, cwd=ROOT)
    runs: dict[str, list[dict[str, float]]] = {"tablestore": [], "paimon": []}
    for _ in range(args.runs):
        for variant in runs:
            runs[variant].append(_once(variant, jar))
    medians: dict[str, Any] = {
        "tablestore_session_s": statistics.median(r["session_s"] for r in runs["tablestore"]),
        "paimon_session_s": statistics.median(r["session_s"] for r in runs["paimon"]),
        "first_micro_batch_s": statistics.median(r["first_micro_batch_s"] for r in runs["tablestore"]),
    }
    medians["session_ratio"] = medians["tablestore_session_s"] / medians["paimon_session_s"]
    print(f"session start (median of {args.runs}): tablestore {medians['tablestore_session_s']:.2f} s, "
          f"plain SparkSession + Paimon's jar {medians['paimon_session_s']:.2f} s, ratio "
          f"{medians['session_ratio']:.2f} (target <= 1.10)")
    print(f"first micro-batch of a streaming upsert write: {medians['first_micro_batch_s']:.2f} s after start() "
          "(target <= 5 s)")
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_start.json").write_text(json.dumps({"medians": medians, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
