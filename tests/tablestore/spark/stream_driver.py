"""A streaming driver for the crash tests (run as its own process), with Trigger.AvailableNow:

    python stream_driver.py write WAREHOUSE TABLE INPUT CHECKPOINT DDL [option=value ...]
        JSON files of INPUT (one per micro-batch, in modification-time order) into TABLE through the `managed` sink;
    python stream_driver.py read WAREHOUSE TABLE OUTPUT CHECKPOINT - [option=value ...]
        the changes of TABLE (tablestore.spark.read_changes) into Parquet files under OUTPUT.

Options given as `key=value` go to the managed source or sink (e.g. the Kafka bootstrap). TABLESTORE_FAULT
(tablestore.faults) stops it at a fault point."""
from __future__ import annotations

import sys

import tablestore.spark
from tablestore.spark.log_publish import PRODUCERS_CONF
from tablestore.spark.sessions import WAREHOUSE_CONF


def main(argv: list[str]) -> None:
    mode, warehouse, table, data, checkpoint, ddl, *pairs = argv
    options = dict(p.split("=", 1) for p in pairs)
    # the executors produce the log (a local session's default is the driver): the crash points of that protocol
    spark = tablestore.spark.local_session("stream-driver", conf={WAREHOUSE_CONF: warehouse,
                                                                  PRODUCERS_CONF: "executors"})
    spark.sparkContext.setLogLevel("ERROR")
    if mode == "write":
        df = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).json(data)
        writer = df.writeStream.format("managed").option("warehouse", warehouse).options(**options)
        query = writer.option("checkpointLocation", checkpoint).trigger(availableNow=True).start(table)
    else:
        df = tablestore.spark.read_changes(spark, table, warehouse=warehouse, **options)
        query = (df.writeStream.format("parquet").option("path", data).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
    query.awaitTermination()
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
