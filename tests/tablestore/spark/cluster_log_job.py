"""Batch writes into a table with a transactional Kafka log, on a cluster, whose log the executors produce after
each commit (tablestore/spark/log_publish.py): with `TABLESTORE_FAULT` passed to the executors, the first log task
stops after producing its bucket, before its transaction commits, so a test can kill its executor (kill -9); with
a PROFILE_DIR, the Python tasks are profiled there (tablestore/spark/profiling.py: a log task's file names its bucket
and its process), so a test can see where each bucket's log tasks ran. The ROWS are written in COMMITS appends.

    python cluster_log_job.py WAREHOUSE MASTER BOOTSTRAP FAULT [COMMITS [PROFILE_DIR]]
"""
from __future__ import annotations

import json
import sys

import pyarrow as pa

import tablestore
import tablestore.spark
from tablestore.faults import FAULT_ENV
from tablestore.spark.profiling import PROFILE_ENV

ROWS = 20_000
BUCKETS = 4


def main(warehouse: str, master: str, bootstrap: str, fault: str, commits: int = 1,
         profile_dir: str = "") -> dict[str, object]:
    spark = tablestore.spark.session(warehouse=warehouse, master=master,
                                     **{"spark.ui.enabled": "false", "spark.executor.memory": "1g",
                                        f"spark.executorEnv.{FAULT_ENV}": fault,
                                        **({f"spark.executorEnv.{PROFILE_ENV}": profile_dir} if profile_dir else {})})
    spark.sparkContext.setLogLevel("ERROR")
    cat = tablestore.Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    table = cat.create_table("db.t", pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())]),
                             primary_key=["id"], options={"bucket": str(BUCKETS), "log.system": "kafka",
                                                          "log.properties.bootstrap.servers": bootstrap})
    per = ROWS // commits
    for i in range(commits):
        df = spark.range(i * per, (i + 1) * per, numPartitions=4).selectExpr("id", "concat('v', id) AS v")
        df.write.format("managed").mode("append").save("db.t")
    seen = {"rows": table.read().num_rows, "snapshots": [s.kind for s in table.snapshots()],
            "pending": list(table._handle.store.snapshots.latest().log_pending),
            "topic": table.options["log.topic"]}
    spark.stop()
    return seen


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 1,
                  sys.argv[6] if len(sys.argv) > 6 else "")
    print("RESULT " + json.dumps(result), flush=True)
