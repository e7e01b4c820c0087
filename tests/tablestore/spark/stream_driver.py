"""A streaming write driver for the crash tests (run as its own process): JSON files of `input` (one per
micro-batch, in name order) into a managed table through the `managed` sink, with Trigger.AvailableNow.

    python stream_driver.py WAREHOUSE TABLE INPUT CHECKPOINT DDL [option=value ...]

Options given as `key=value` go to the sink (e.g. the Kafka bootstrap). TABLESTORE_FAULT (tablestore.faults)
stops it at a point of a commit."""
from __future__ import annotations

import sys

import tablestore.spark
from tablestore.spark.sessions import WAREHOUSE_CONF


def main(argv: list[str]) -> None:
    warehouse, table, source, checkpoint, ddl, *pairs = argv
    options = dict(p.split("=", 1) for p in pairs)
    spark = tablestore.spark.local_session("stream-driver", conf={WAREHOUSE_CONF: warehouse})
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).json(source)
    query = (df.writeStream.format("managed").option("warehouse", warehouse).options(**options)
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(table))
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
