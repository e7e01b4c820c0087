"""How long a Spark job with managed tables takes to start, against a plain SparkSession with Paimon's jar.

    python bench/spark_start_bench.py [--runs 3]

Each run is a fresh Python process (what a user's job is), the variants interleaved (a b a b: the machine's load
drifts), on PySpark 4.1.2 (`.venv-spark-4.1.2`, made by bench/spark_peers.py's set-up; Paimon's jar from
scripts/paimon/build.py) with the tablestore jar already built (a warm machine):
- session: from the process's first import to a session that has run `spark.range(1).count()`, for
  `tablestore.spark.local_session()` and for `SparkSession.builder` with Paimon's jar, catalog and extension;
- first micro-batch: in the tablestore process, from `writeStream...start()` of a streaming upsert write into a
  managed table (a Parquet file source, one file per trigger, rows of a `_row_kind` stream) to its first micro-batch
  committed (the query's first progress), with when its write job was submitted (the write planned) and done;
- the floor of that: the same stream into a Python data source whose writer drops the rows (`python-source`: what
  PySpark charges any Python data source's first micro-batch: its Python workers' daemons started).
Targets (issue 22): the session within 10% of Paimon's; the first micro-batch within 5 s of start(). Prints the
medians and writes bench/out/spark_start.json.

`--pause S` waits S seconds after the session before the query (a user typing, a service starting its queries
later), when the session's background warm-up finds idle CPUs (tablestore/spark/warm_up.py); the default 0 is a
script that starts its query at once. `--against DIR` also times the tablestore process with the code of another
checkout DIR (PYTHONPATH=DIR, its own jar), interleaved with this one's: a change's effect measured in one run.
`--no-paimon` skips Paimon's session.
"""
from __future__ import annotations

import argparse
import json
import os
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
variant, jar, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
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
    time.sleep(pause)   # --pause: a user between the session and the query (tablestore/spark/warm_up.py)
    spark.sparkContext.setLogLevel("ERROR")
    src = os.path.join(wh, "src")
    os.makedirs(src)
    for i in range(3):
        pq.write_table(pa.table({"id": pa.array(range(i * 1000, (i + 1) * 1000), pa.int64()),
                                 "v": pa.array([f"v{i}"] * 1000), "op": pa.array(["+I"] * 1000)}),
                       os.path.join(src, f"part-{i}.parquet"))
    stream = (spark.readStream.schema("id BIGINT, v STRING, op STRING").option("maxFilesPerTrigger", 1)
              .parquet(src).withColumnRenamed("op", "_row_kind"))
    if variant == "python-source":   # the floor: a Python data source whose writer drops the rows
        from pyspark.sql.datasource import DataSource, DataSourceStreamArrowWriter, WriterCommitMessage

        class Dropping(DataSourceStreamArrowWriter):
            def write(self, iterator):
                for _ in iterator:
                    pass
                return WriterCommitMessage()

            def commit(self, messages, batchId):
                pass

            def abort(self, messages, batchId):
                pass

        class NullSink(DataSource):
            @classmethod
            def name(cls):
                return "nullsink"

            def streamWriter(self, schema, overwrite):
                return Dropping()

        spark.dataSource.register(NullSink)
        writer = stream.writeStream.format("nullsink")
        target = None
    else:
        spark.sql("CREATE DATABASE managed.s")
        spark.sql("CREATE TABLE managed.s.t (id BIGINT NOT NULL, v STRING) TBLPROPERTIES ('primary-key' = 'id')")
        writer = stream.writeStream.format("managed")
        target = "s.t"
    wall = time.time()
    start = time.perf_counter()
    query = writer.option("checkpointLocation", os.path.join(wh, "ck")).start(target)
    while query.lastProgress is None:
        if query.exception() is not None:
            raise RuntimeError(str(query.exception()))
        time.sleep(0.02)
    out["first_micro_batch_s"] = time.perf_counter() - start
    query.stop()
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    times = []
    for j in range(jobs.size()):
        job = jobs.apply(j)
        submitted = job.submissionTime().get().getTime() / 1000
        if submitted >= wall and job.completionTime().isDefined():
            times.append((submitted - wall, job.completionTime().get().getTime() / 1000 - wall))
    if times:   # the first micro-batch's write job: when it was submitted (the write planned) and done
        out["job_submitted_s"], out["job_done_s"] = min(times)
print("RESULT " + json.dumps(out))
'''


def _once(variant: str, jar: str, pause: float, code: Path | None = None) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(code)} if code is not None else None
    done = subprocess.run([str(PYTHON), "-c", CHILD, variant, jar, str(pause)], capture_output=True, text=True,
                          cwd=code or ROOT, env=env)
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--against", type=Path, default=None, help="another checkout, timed alternately")
    ap.add_argument("--no-paimon", action="store_true", help="skip the session with Paimon's jar")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between the session and the query (a user typing; the warm-up's idle CPUs)")
    args = ap.parse_args()
    jar = ""
    if not args.no_paimon:
        sys.path.insert(0, str(ROOT / "scripts" / "paimon"))
        from build import jar_path   # type: ignore[import-not-found]

        jar = str(jar_path())
    build = "from tablestore.spark import jar; jar.jar_path()"
    subprocess.run([str(PYTHON), "-c", build], check=True, cwd=ROOT)
    if args.against is not None:
        subprocess.run([str(PYTHON), "-c", build], check=True, cwd=args.against,
                       env={**os.environ, "PYTHONPATH": str(args.against)})
    codes: dict[str, Path | None] = {"tablestore": None}
    if args.against is not None:
        codes["against"] = args.against.resolve()
    variants = [*codes, "python-source", *([] if args.no_paimon else ["paimon"])]
    runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
    for _ in range(args.runs):
        for variant in variants:
            runs[variant].append(_once("tablestore" if variant in codes else variant, jar, args.pause,
                                       codes.get(variant)))
    medians: dict[str, Any] = {
        "tablestore_session_s": statistics.median(r["session_s"] for r in runs["tablestore"]),
        "first_micro_batch_s": statistics.median(r["first_micro_batch_s"] for r in runs["tablestore"]),
    }
    if not args.no_paimon:
        medians["paimon_session_s"] = statistics.median(r["session_s"] for r in runs["paimon"])
        medians["session_ratio"] = medians["tablestore_session_s"] / medians["paimon_session_s"]
        print(f"session start (median of {args.runs}): tablestore {medians['tablestore_session_s']:.2f} s, "
              f"plain SparkSession + Paimon's jar {medians['paimon_session_s']:.2f} s, ratio "
              f"{medians['session_ratio']:.2f} (target <= 1.10)")
    print(f"first micro-batch of a streaming upsert write: {medians['first_micro_batch_s']:.2f} s after start() "
          f"(target <= 5 s); runs {[round(r['first_micro_batch_s'], 2) for r in runs['tablestore']]}")
    if args.against is not None:
        medians["against_first_micro_batch_s"] = statistics.median(
            r["first_micro_batch_s"] for r in runs["against"])
        print(f"  the same with {args.against}: {medians['against_first_micro_batch_s']:.2f} s; runs "
              f"{[round(r['first_micro_batch_s'], 2) for r in runs['against']]}")
    print("where it goes (medians, s after start()): variant, write job submitted (the write planned), job done "
          "(the tasks), first micro-batch committed")
    for variant in [v for v in variants if v != "paimon"]:
        phases = {k: statistics.median(r.get(k, float("nan")) for r in runs[variant])
                  for k in ("job_submitted_s", "job_done_s", "first_micro_batch_s")}
        medians[f"{variant}_phases"] = phases
        print(f"  {variant:14} {phases['job_submitted_s']:6.2f} {phases['job_done_s']:6.2f} "
              f"{phases['first_micro_batch_s']:6.2f}")
    if args.against is not None:
        medians["against_session_s"] = statistics.median(r["session_s"] for r in runs["against"])
        print(f"session start (median): {medians['tablestore_session_s']:.2f} s, with {args.against}: "
              f"{medians['against_session_s']:.2f} s")
    OUT.mkdir(exist_ok=True)
    (OUT / "spark_start.json").write_text(json.dumps({"medians": medians, "runs": runs, "pause_s": args.pause},
                                                     indent=2))


if __name__ == "__main__":
    main()
