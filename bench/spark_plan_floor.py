"""What planning a read costs on the installed PySpark (not a test): a plain Python data source of two constant rows
(the floor any Python data source pays per round trip to the driver's Python planner) against a `managed` table's
read of a compacted table, planned only and run into Spark's `noop` sink, and of the same rows in four sorted runs
per bucket (every split merged), `format("managed").load()` alone and planned, with Spark's own Parquet scan of the
same rows and a trivial Spark job for scale.

    python bench/spark_plan_floor.py [--rows 4000000]          # run it with each PySpark's venv to compare

Each figure is the best and the median of 5 runs after one warm-up run, in one local[2] session. Prints a table and
writes bench/out/spark_plan_floor-<pyspark version>.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # noqa: E402

import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402


class _ConstantReader(DataSourceReader):
    def partitions(self) -> list[InputPartition]:
        return [InputPartition(0), InputPartition(1)]

    def read(self, partition: InputPartition) -> Iterator[tuple[int, int]]:
        yield (1, 2)


class ConstantSource(DataSource):
    """The smallest Python data source: two input partitions of one row each."""

    @classmethod
    def name(cls) -> str:
        return "constant_floor"

    def schema(self) -> str:
        return "a INT, b INT"

    def reader(self, schema: Any) -> DataSourceReader:
        return _ConstantReader()


def _times(run: Callable[[], Any], repeat: int = 5) -> dict[str, float]:
    run()   # warm-up
    ts = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        ts.append(time.perf_counter() - start)
    return {"best_s": round(min(ts), 4), "median_s": round(float(np.median(ts)), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4_000_000)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="spark-plan-floor-"))
    cat = tablestore.Catalog(str(work / "wh"))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int64()), ("b", pa.float64()), ("c", pa.string())])
    t = cat.create_table("db.t", schema, primary_key=["id"], options={"bucket": "2"})
    rng = np.random.default_rng(1)
    n = args.rows
    ids = rng.permutation(n).astype(np.int64)
    rows = pa.table({"id": ids, "a": rng.integers(0, 1 << 40, n), "b": rng.random(n),
                     "c": pa.array(np.char.add("v", (ids % 100_000).astype(str)))}, schema=schema)
    t.write(rows)
    t.compact(full=True)
    runs = cat.create_table("db.runs", schema, primary_key=["id"], options={"bucket": "2", "write-only": "true"})
    for part in range(4):   # four sorted runs per bucket, each spanning the keys: every split needs a merge
        runs.write(rows.slice(part * n // 4, n // 4))
    pq.write_table(rows, work / "plain.parquet", row_group_size=65_536)
    spark = tablestore.spark.local_session("spark-plan-floor", conf={"spark.sql.catalog.managed.warehouse":
                                                                     str(work / "wh")})
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(ConstantSource)
    bound = n // 100

    def noop(df: Any) -> None:
        df.write.format("noop").mode("overwrite").save()

    def planned(df: Any) -> None:
        df._jdf.queryExecution().executedPlan()

    cases: dict[str, Callable[[], Any]] = {
        "python source: load()": lambda: spark.read.format("constant_floor").load(),
        "python source: load() and plan": lambda: planned(spark.read.format("constant_floor").load()),
        "managed: SELECT * plan": lambda: planned(spark.sql("SELECT * FROM managed.db.t")),
        "managed: 1% range plan": lambda: planned(spark.sql(f"SELECT * FROM managed.db.t WHERE id < {bound}")),
        "managed: format load()": lambda: spark.read.format("managed").option("warehouse", str(work / "wh"))
        .load("db.t"),
        "managed: format load() and plan": lambda: planned(spark.read.format("managed")
                                                           .option("warehouse", str(work / "wh")).load("db.t")),
        "managed: SELECT * -> noop": lambda: noop(spark.sql("SELECT * FROM managed.db.t")),
        "managed, 4 runs: SELECT * -> noop": lambda: noop(spark.sql("SELECT * FROM managed.db.runs")),
        "managed, 4 runs: 1% range -> noop": lambda: noop(spark.sql(f"SELECT * FROM managed.db.runs "
                                                                    f"WHERE id < {bound}")),
        "managed: 1% range -> noop": lambda: noop(spark.sql(f"SELECT * FROM managed.db.t WHERE id < {bound}")),
        "spark parquet: scan -> noop": lambda: noop(spark.read.parquet(str(work / "plain.parquet"))),
        "spark parquet: 1% range -> noop": lambda: noop(spark.read.parquet(str(work / "plain.parquet"))
                                                         .where(f"id < {bound}")),
        "trivial job: range(10000) -> noop": lambda: noop(spark.range(10_000)),
    }
    results = {name: _times(run) for name, run in cases.items()}
    version = spark.version
    spark.stop()
    print(f"PySpark {version}, local[2], {n:,} rows compacted into 2 buckets; best / median of 5")
    for name, r in results.items():
        print(f"{name:36} {r['best_s']:7.3f} s {r['median_s']:7.3f} s")
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / f"spark_plan_floor-{version}.json").write_text(json.dumps({"pyspark": version, "rows": n,
                                                                      "results": results}, indent=2) + "\n")


if __name__ == "__main__":
    main()
