"""Spark SQL shells with the `managed` catalog: the arguments a user's own `spark-sql` / `spark-submit` /
`pyspark` needs (`spark_sql_args`), and PySpark's own `bin/spark-sql` started with them (`tablestore sql`).

    spark-sql $(python -c 'import tablestore.spark as s; print(" ".join(s.spark_sql_args(warehouse="/wh")))')
"""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Sequence

from tablestore.spark.jar import SparkJarError, jar_path
from tablestore.spark.sessions import (
    CATALOG_CLASS, CATALOG_CONF, EXTENSIONS_CLASS, EXTENSIONS_CONF, REQUIRED_CONF, WAREHOUSE_CONF,
)


def spark_sql_args(*, warehouse: str, python: str | None = None) -> list[str]:
    """`--jars` / `--conf` arguments that configure a Spark shell or job for managed tables: the tablestore jar
    (built on first use), the catalog `managed` over `warehouse`, the SQL extension, Python filter pushdown, and
    the Python the catalog and the data source run (`python`, default: this interpreter)."""
    conf = {
        CATALOG_CONF: CATALOG_CLASS,
        WAREHOUSE_CONF: warehouse,
        EXTENSIONS_CONF: EXTENSIONS_CLASS,
        **REQUIRED_CONF,
        "spark.pyspark.python": python or sys.executable,
        "spark.sql.session.timeZone": "UTC",
    }
    args = ["--jars", str(jar_path())]
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def spark_sql_executable() -> Path:
    """PySpark's own `bin/spark-sql`."""
    import pyspark

    path = Path(pyspark.__file__).resolve().parent / "bin" / "spark-sql"
    if not path.exists():
        raise SparkJarError(f"PySpark {pyspark.__version__} has no {path}: install the full pyspark package")
    return path


def spark_sql_command(*, warehouse: str, execute: str | None = None, file: str | None = None,
                      extra: Sequence[str] = ()) -> list[str]:
    """The `spark-sql` command line of `tablestore sql`: `-e` / `-f` and any other spark-sql arguments passed on."""
    command = [str(spark_sql_executable()), *spark_sql_args(warehouse=warehouse)]
    if execute is not None:
        command += ["-e", execute]
    if file is not None:
        command += ["-f", file]
    return [*command, *extra]


def exec_spark_sql(command: Sequence[str]) -> None:
    """Replace this process with `spark-sql` (its exit code is the command's)."""
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)   # executors' Python workers
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.execve(command[0], list(command), env)
