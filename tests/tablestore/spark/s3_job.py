"""A Spark job on an S3 warehouse, as a user runs one: `tablestore.spark.session(warehouse="s3://...", **{"spark.sql.catalog.managed.s3.endpoint": ...})`
on a master (local or a standalone cluster), then SQL DDL and DML, `df.write` / `spark.read`, a streaming write and
compaction. Prints one JSON line of what it saw; tests/tablestore/spark/test_spark_s3.py checks it.

    python s3_job.py WAREHOUSE MASTER OPTIONS_JSON WORK_DIR
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

import tablestore
import tablestore.spark


def main(warehouse: str, master: str, options: dict[str, str], work: Path) -> dict[str, object]:
    conf = {f"spark.sql.catalog.managed.{k}": v for k, v in options.items()}   # the catalog's S3 options
    spark = tablestore.spark.session(warehouse=warehouse, master=master,
                                     **{"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
                                        "spark.executor.memory": "1g",
                                        "spark.tablestore.s3a.ship": "false",   # one machine: the S3A jars are where the driver has them
                                        **conf})
    spark.sparkContext.setLogLevel("ERROR")
    seen: dict[str, object] = {}
    spark.sql("CREATE DATABASE managed.db")
    spark.sql("CREATE TABLE managed.db.t (id BIGINT NOT NULL, v STRING, n BIGINT, PRIMARY KEY (id) NOT ENFORCED) "
              "TBLPROPERTIES ('bucket' = '2')")
    spark.sql("INSERT INTO managed.db.t SELECT id, concat('v', id), 1 FROM range(0, 1000)")
    spark.sql("INSERT INTO managed.db.t SELECT id, concat('u', id), 2 FROM range(500, 1500)")   # upserts by key
    seen["sql"] = [tuple(r) for r in spark.sql(
        "SELECT count(*), sum(n), min(v) FROM managed.db.t").collect()][0]

    df = spark.range(1500, 2000).selectExpr("id", "concat('w', id) AS v", "3L AS n")
    df.write.format("managed").mode("append").save("db.t")
    seen["read"] = spark.read.format("managed").load("db.t").count()

    source = work / "stream-in"
    source.mkdir(parents=True, exist_ok=True)
    for batch in range(3):
        ids = list(range(2000 + batch * 100, 2100 + batch * 100))
        pq.write_table(pa.table({"id": ids, "v": [f"s{i}" for i in ids], "n": [4] * len(ids)}),
                       source / f"part-{batch}.parquet")
    stream = spark.readStream.schema("id BIGINT, v STRING, n BIGINT").parquet(str(source))
    query = (stream.writeStream.format("managed").option("checkpointLocation", f"{warehouse}/_checkpoints/stream")
             .trigger(availableNow=True).start("db.t"))
    query.awaitTermination()
    seen["after_stream"] = spark.read.format("managed").load("db.t").count()

    spark.sparkContext.setJobGroup("compact", "CALL compact")   # on a cluster its tasks rewrite the buckets
    spark.sql("CALL managed.system.compact(table => 'db.t')")
    seen["compact_jobs"] = len(spark.sparkContext.statusTracker().getJobIdsForGroup("compact"))
    spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    table = tablestore.Catalog(warehouse, options=options).get_table("db.t")
    seen["kinds"] = sorted({s.kind for s in table.snapshots()})
    seen["after_compact"] = [tuple(r) for r in spark.sql(
        "SELECT count(*), sum(n) FROM managed.db.t").collect()][0]
    seen["python_rows"] = table.read().num_rows
    seen["executors"] = spark.sparkContext._jsc.sc().getExecutorIds().size()   # 0 in local mode: the driver's JVM
    spark.stop()
    return seen


if __name__ == "__main__":
    wh, master_url, opts, work_dir = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), Path(sys.argv[4])
    print("RESULT " + json.dumps(main(wh, master_url, opts, work_dir)), flush=True)
