"""A Spark job on an S3 warehouse whose session has Hadoop's S3A (tablestore/spark/s3a.py adds it): the JVM writer
writes the bucket, Spark's Parquet reader reads the splits that need no merge from it (the raw-split reader), a
streaming query keeps its checkpoint in the bucket and resumes from it, and the buckets of several runs it leaves are
merged in the JVM. Prints one JSON line of what it saw;
tests/tablestore/spark/test_spark_s3a.py checks it.

    python s3a_job.py WAREHOUSE OPTIONS_JSON WORK_DIR
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import tablestore
import tablestore.spark
from tablestore.spark.s3a import jvm_has_s3a, to_s3a


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _rows(df: Any) -> list[list[Any]]:
    return sorted([list(r) for r in df.collect()])


def _creators(table: tablestore.Table) -> list[str]:
    """The writers of the table's live data files (parquet-mr: the JVM writer; parquet-cpp-arrow: Python's)."""
    store = table._handle.store
    out = []
    for e in store.live_entries(store.snapshots.latest()).values():
        with store.io.open_input(store.data_file_path(e.partition, e.bucket, e.file.file_name)) as f:
            out.append(pq.ParquetFile(f).metadata.created_by.split(" ")[0])
    return sorted(set(out))


def main(warehouse: str, options: dict[str, str], work: Path) -> dict[str, object]:
    conf = {f"spark.sql.catalog.managed.{k}": v for k, v in options.items()}   # the catalog's S3 options
    spark = tablestore.spark.session(warehouse=warehouse, master="local[2]",
                                     **{"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", **conf})
    spark.sparkContext.setLogLevel("ERROR")
    seen: dict[str, object] = {"s3a": jvm_has_s3a(spark)}
    catalog = tablestore.Catalog(warehouse, options=options)
    spark.sql("CREATE DATABASE managed.db")
    spark.sql("CREATE TABLE managed.db.t (id BIGINT NOT NULL, v STRING, n BIGINT, d DOUBLE, "
              "PRIMARY KEY (id) NOT ENFORCED) TBLPROPERTIES ('bucket' = '2')")
    rows = spark.range(0, 5000).selectExpr("id", "concat('v', id) AS v", "id % 7 AS n", "id / 3 AS d")
    rows.write.format("managed").mode("append").save("db.t")   # the JVM writer
    seen["creators"] = _creators(catalog.get_table("db.t"))

    raw = spark.read.format("managed").load("db.t")      # one sorted run per bucket: the raw-split reader
    # a key range: raw splits too, opened on S3A with the filter's Parquet predicate (row groups skipped)
    ranged = spark.read.format("managed").load("db.t").filter("id >= 2500")
    seen["raw_columnar"] = "ColumnarToRow" in _plan(raw)
    seen["range_columnar"] = "ColumnarToRow" in _plan(ranged)
    raw_rows, ranged_rows = _rows(raw), _rows(ranged)
    seen["range_equals_raw"] = ranged_rows == [r for r in raw_rows if r[0] >= 2500]
    library = catalog.get_table("db.t").read().sort_by("id")
    seen["raw_equals_library"] = raw_rows == [list(r.values()) for r in library.to_pylist()]
    seen["rows"] = len(raw_rows)
    sql = spark.sql("SELECT id, n FROM managed.db.t")   # the SQL catalog's scan: raw too
    seen["sql_columnar"] = "ColumnarToRow" in _plan(sql)
    seen["sql_equals"] = sorted([list(r) for r in sql.collect()]) == [[r[0], r[2]] for r in raw_rows]

    source = work / "stream-in"
    source.mkdir(parents=True, exist_ok=True)
    checkpoint = to_s3a(f"{warehouse}/_checkpoints/stream")
    counts = []
    for batch in range(2):   # the second run resumes from the checkpoint in the bucket: only the new file
        ids = list(range(100_000 + batch * 100, 100_100 + batch * 100))
        pq.write_table(pa.table({"id": ids, "v": [f"s{i}" for i in ids], "n": [1] * 100, "d": [0.5] * 100}),
                       source / f"part-{batch}.parquet")
        query = (spark.readStream.schema("id BIGINT, v STRING, n BIGINT, d DOUBLE").parquet(str(source))
                 .writeStream.format("managed").option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start("db.t"))
        query.awaitTermination()
        counts.append(spark.read.format("managed").load("db.t").count())
    seen["stream_counts"] = counts
    seen["appends"] = sum(s.kind == "APPEND" for s in catalog.get_table("db.t").snapshots())
    # three sorted runs per bucket now: merged in the JVM, each run's files opened on S3A
    merged = spark.sql("SELECT id, v FROM managed.db.t WHERE id >= 4990")
    seen["merged_in_jvm"] = "merged in the JVM" in _plan(merged) and "0 merged in the JVM" not in _plan(merged)
    library = catalog.get_table("db.t").read()
    seen["merged_equals_library"] = _rows(merged) == sorted(
        [r["id"], r["v"]] for r in library.to_pylist() if r["id"] >= 4990)
    spark.stop()
    return seen


if __name__ == "__main__":
    wh, opts, work_dir = sys.argv[1], json.loads(sys.argv[2]), Path(sys.argv[3])
    print("RESULT " + json.dumps(main(wh, opts, work_dir)), flush=True)
