"""Spark SQL shells with the `managed` catalog: the arguments a user's own `spark-sql` / `spark-submit` /
`pyspark` needs (`spark_sql_args`), and PySpark's own `bin/spark-sql` started with them (`tablestore sql`).

    spark-sql $(python -c 'import tablestore.spark as s; print(" ".join(s.spark_sql_args(warehouse="/wh")))')

Errors in `tablestore sql`: spark-sql prints a failed statement's message, then its JVM stack (240-370 lines for a
catalog error, whose cause is the Python catalog's) unless the shell is silent (`-S`); and Spark's own log prints a
failed task's stack on the console too. So `tablestore sql` starts it silent, which prints the message alone, with a
log4j2 configuration (`log_config`) that writes Spark's log (WARN and above) and the stack of every failed statement
(spark-sql's driver logs it at DEBUG) to `logs/sql.log` in the cache directory instead of the console. `--verbose` starts
it as spark-sql starts by default: its log and the stacks on the console.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Sequence

from tablestore.spark import logs
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


def log_config() -> tuple[Path, Path]:
    """(the log4j2 configuration of `tablestore sql`, the log it writes: `<cache>/logs/sql.log`)."""
    return logs.log_config("sql")


def spark_sql_command(*, warehouse: str, execute: str | None = None, file: str | None = None,
                      extra: Sequence[str] = (), verbose: bool = False) -> list[str]:
    """The `spark-sql` command line of `tablestore sql`: `-e` / `-f` and any other spark-sql arguments passed on;
    silent (an error is its message) with the stacks in the log unless `verbose`."""
    command = [str(spark_sql_executable()), *spark_sql_args(warehouse=warehouse)]
    if not verbose:
        config, _ = log_config()
        command += ["--driver-java-options", f"-Dlog4j2.configurationFile={config}", "-S"]
    if execute is not None:
        command += ["-e", execute]
    if file is not None:
        command += ["-f", file]
    return [*command, *extra]


JVM_NOTICE = b"WARNING: Using incubator modules"
"""What the JVM prints at every start of Spark 4 (its launcher adds `--add-modules=jdk.incubator.vector`): no flag
turns it off, so `tablestore sql` drops that line of spark-sql's stderr (`--verbose` keeps it)."""


def run_spark_sql(command: Sequence[str], *, verbose: bool = False) -> int:
    """`spark-sql` as a child process, its exit code returned; its stdin and stdout are this process's (the
    interactive shell keeps the terminal), its stderr passed on line by line without the JVM's start-up notice.
    Ctrl-C is the shell's (it cancels a statement): this process ignores it and waits."""
    env = dict(os.environ)
    env.setdefault("PYSPARK_PYTHON", sys.executable)   # executors' Python workers
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if verbose:
        return subprocess.call(list(command), env=env)
    proc = subprocess.Popen(list(command), env=env, stderr=subprocess.PIPE)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if not line.startswith(JVM_NOTICE):
                sys.stderr.buffer.write(line)
                sys.stderr.buffer.flush()
        return proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
