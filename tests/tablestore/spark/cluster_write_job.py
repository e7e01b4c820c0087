"""A batch write whose tasks run long enough to lose an executor in the middle: `ROWS` rows in `PARTITIONS` tasks
through a Python map that sleeps, into the managed table db.t, on a cluster. Each task touches
`WORK/started-<partition>-<attempt>` when it begins, so a test knows when to kill an executor (kill -9).

    python cluster_write_job.py WAREHOUSE MASTER OPTIONS_JSON WORK
"""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Iterator

import pyarrow as pa

import tablestore
import tablestore.spark

ROWS = 40_000
PARTITIONS = 8
TASK_SECONDS = 4.0


def main(warehouse: str, master: str, options: dict[str, str], work: str) -> dict[str, object]:
    conf = {f"spark.sql.catalog.managed.{k}": v for k, v in options.items()}
    spark = tablestore.spark.session(warehouse=warehouse, master=master,
                                     **{"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
                                        "spark.executor.memory": "1g",
                                        "spark.tablestore.s3a.ship": "false",   # one machine: the S3A jars are where the driver has them
                                        **conf})
    spark.sparkContext.setLogLevel("ERROR")
    cat = tablestore.Catalog(warehouse, options=options)
    cat.create_database("db", ignore_if_exists=True)
    cat.create_table("db.t", pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())]),
                     primary_key=["id"], options={"bucket": "4"}, ignore_if_exists=True)

    def slow(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        Path(work, f"started-{ctx.partitionId()}-{ctx.attemptNumber()}").touch()
        for batch in batches:
            time.sleep(TASK_SECONDS)
            yield batch

    df = (spark.range(0, ROWS, numPartitions=PARTITIONS).selectExpr("id", "concat('v', id) AS v")
          .mapInArrow(slow, "id long, v string"))
    df.write.format("managed").mode("append").save("db.t")
    table = cat.get_table("db.t")
    seen = {"rows": table.read().num_rows, "snapshots": [s.kind for s in table.snapshots()]}
    spark.stop()
    return seen


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4])
    print("RESULT " + json.dumps(result), flush=True)
