"""A local SparkSession configured the way tablestore's Spark integration needs it: the RocksDB state store and
the tablestore Spark jar (`jar.py`) on the classpath. Creating one is explicit: importing tablestore.spark never
starts Spark."""
from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Mapping

from tablestore.spark.jar import jar_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

REQUIRED_CONF: Mapping[str, str] = {
    # the materializer's state lives in RocksDB, as in the checkpoints of every stateful tablestore query
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
}


def local_session(app_name: str = "tablestore", *, cores: int = 2,
                  conf: Mapping[str, str] | None = None) -> "SparkSession":
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter (the project's venv), not whatever `python3` is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode talks over loopback only
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.memory", "2g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
    )
    settings = {**REQUIRED_CONF, **(conf or {})}
    jars = [j for j in settings.get("spark.jars", "").split(",") if j]
    settings["spark.jars"] = ",".join([str(jar_path()), *jars])
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
