"""Batch writes into a table with a transactional Kafka log, on a cluster, whose log the executors produce (one task
per bucket after each commit, tablestore/spark/log_publish.py), with the Python tasks profiled into PROFILE_DIR
(tablestore/spark/profiling.py: a log task's file names its bucket and its process) so that a test can see where
each bucket's log tasks ran.

    python cluster_log_placement_job.py WAREHOUSE MASTER BOOTSTRAP PROFILE_DIR
"""
from __future__ import annotations

import json
import sys

import pyarrow as pa

import tablestore
import tablestore.spark
from tablestore.spark.profiling import PROFILE_ENV

BUCKETS = 4
COMMITS = 4


def main(warehouse: str, master: str, bootstrap: str, profile_dir: str) -> dict[str, object]:
    spark = tablestore.spark.session(warehouse=warehouse, master=master,
                                     **{"spark.ui.enabled": "false", "spark.executor.memory": "1g",
                                        f"spark.executorEnv.{PROFILE_ENV}": profile_dir})
    spark.sparkContext.setLogLevel("ERROR")
    cat = tablestore.Catalog(warehouse)
    cat.create_database("db", ignore_if_exists=True)
    table = cat.create_table("db.t", pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())]),
                             primary_key=["id"], options={"bucket": str(BUCKETS), "log.system": "kafka",
                                                          "log.properties.bootstrap.servers": bootstrap})
    for i in range(COMMITS):
        df = spark.range(i * 1000, (i + 1) * 1000, numPartitions=2).selectExpr("id", "concat('v', id) AS v")
        df.write.format("managed").mode("append").save("db.t")
    seen = {"rows": table.read().num_rows, "pending": list(table._handle.store.snapshots.latest().log_pending)}
    spark.stop()
    return seen


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4])
    print("RESULT " + json.dumps(result), flush=True)
