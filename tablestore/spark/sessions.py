"""SparkSessions configured the way tablestore's Spark integration needs them. Creating one is explicit: importing
tablestore.spark never starts Spark.

- `session(warehouse=..., master=None, **conf)`: the session of the `managed` data source and the `managed` SQL
  catalog (the jar, the catalog `spark.sql.catalog.managed` with its warehouse, the SQL extension, Python filter
  pushdown on, the RocksDB state store, the warehouse the data source reads and writes by default).
- `local_session(...)`: a local session for the materializer operator (kept for existing callers).

The data source itself is registered statically (the top-level module `pyspark_managed`, found by every PySpark
session whose Python workers can import it), so a session built by hand finds `managed` as well; it then needs
`spark.sql.python.filterPushdown.enabled=true` (`REQUIRED_CONF`), and the warehouse as a read/write option.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Mapping

import catalog
from tablestore.spark import logs
from tablestore.spark.jar import jar_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
CATALOG_NAME = "managed"
CATALOG_CLASS = "tablestore.spark.jvm.catalog.ManagedCatalog"
EXTENSIONS_CLASS = "tablestore.spark.jvm.catalog.ManagedExtensions"
CATALOG_CONF = f"spark.sql.catalog.{CATALOG_NAME}"
EXTENSIONS_CONF = "spark.sql.extensions"
WAREHOUSE_CONF = f"{CATALOG_CONF}.warehouse"
WAREHOUSE_ENV = "TABLESTORE_WAREHOUSE"
"""The Python data source runs in Python workers that cannot read the session's conf: the default warehouse
reaches them through this environment variable (of the driver, inherited by the JVM and its workers, and set on
executors with `spark.executorEnv.`)."""

REQUIRED_CONF: Mapping[str, str] = {
    # the materializer's state lives in RocksDB, as in the checkpoints of every stateful tablestore query
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    # without it every read of `managed` fails: its reader prunes partitions and files with the pushed filters
    "spark.sql.python.filterPushdown.enabled": "true",
}


FORK_SAFE_ENV: Mapping[str, str] = {
    "OPENBLAS_NUM_THREADS": "1",   # numpy's import starts no OpenBLAS thread pool
    "JE_ARROW_MALLOC_CONF": "background_thread:false",   # pyarrow's import starts no jemalloc thread
}
"""PySpark 4.1 only, set in the environment the JVM and its Python workers inherit (an explicit value wins). 4.1's
Python worker daemon imports the worker module before it forks each worker; with threads started by that import
(numpy's, pyarrow's) a worker forked while one of them holds a lock can hang before it connects back, and 4.1
waits for it forever: a job that never ends. PySpark 4.2 imports after the fork and restarts a daemon whose worker
never connects (SPARK-54711). With these, the import starts no thread. (pyarrow's default pool is mimalloc:
jemalloc's background thread only returns memory of a pool nobody uses.)"""


def _python_env() -> None:
    # Python workers must run this interpreter (the project's venv), not whatever `python3` is on PATH
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    import pyspark

    if tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 2):
        for key, value in FORK_SAFE_ENV.items():
            os.environ.setdefault(key, value)


def session(warehouse: str | None = None, *, master: str | None = None, app_name: str = "tablestore",
            kafka: bool = False, **conf: str) -> "SparkSession":
    """A SparkSession for managed tables: `local[*]` unless `master` is given; `conf` are Spark settings
    (``**{"spark.sql.shuffle.partitions": "8"}``) that win over the defaults set here. `kafka=True` adds Spark's
    Kafka source and sink (`tablestore.spark.kafka`: jars from Maven Central, fetched once), which
    `tablestore.spark.read_cdc` and `tablestore ingest` read with.

    `warehouse` is where `spark.read.format("managed").load("db.t")` finds tables unless a read or write gives
    ``.option("warehouse", ...)``. If a session is already running in this process, Spark returns it and applies
    only the settings that can change at runtime: a new jar or warehouse needs `spark.stop()` first.

    A session this call starts writes Spark's log and the JVM's stderr to a log file (`tablestore.spark.logs`:
    `~/.cache/tablestore/logs/spark.log`), not the console, unless `TABLESTORE_SPARK_LOG=console`.

    The catalog's options (`s3.endpoint`, `s3.access-key`, ...: docs/options.md) are settings with the catalog's
    prefix (``**{"spark.sql.catalog.managed.s3.endpoint": "http://..."}``): they reach the Python workers and the
    catalog service (`catalog_environment`) and Spark's own S3A file system (`fs.s3a.*`).
    """
    from pyspark.sql import SparkSession

    _python_env()
    settings: dict[str, str] = {
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        # compiled code of every operator of the plans a job runs again: `ingest-database` plans a decoder per table
        # and micro-batch (about 10 classes each); Spark's default cache of 100 recompiled them all at every one
        # (measured: 212 compilations, 3 s of a 20-table micro-batch; 42 with this)
        "spark.sql.codegen.cache.maxEntries": "2000",
        **REQUIRED_CONF,
    }
    if master is None or master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")   # local mode talks over loopback only
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    if warehouse is not None:
        os.environ[WAREHOUSE_ENV] = warehouse
        settings[WAREHOUSE_CONF] = warehouse
        settings[f"spark.executorEnv.{WAREHOUSE_ENV}"] = warehouse
    settings.update({k: str(v) for k, v in conf.items()})
    settings.update(catalog_environment(settings))
    from tablestore.spark.s3a import session_settings as s3a_settings   # hadoop-aws when the settings name S3

    settings.update(s3a_settings(settings, master))
    settings.setdefault(CATALOG_CONF, CATALOG_CLASS)
    settings.setdefault("spark.redaction.regex", catalog.SPARK_REDACTION_REGEX)   # the UI, event log, SQL options
    settings[EXTENSIONS_CONF] = with_extension(settings.get(EXTENSIONS_CONF))
    jars = [j for j in settings.get("spark.jars", "").split(",") if j]
    if kafka:
        from tablestore.spark.kafka import kafka_jars

        jars += [str(j) for j in kafka_jars() if str(j) not in jars]
    settings["spark.jars"] = ",".join([str(jar_path()), *jars])
    logs.quiet_python()
    if logs.quiet_wanted():
        logs.set_active(logs.launch_quiet_gateway({**settings, "spark.master": master or "local[*]",
                                                   "spark.app.name": app_name}))
    builder = SparkSession.builder.master(master or "local[*]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    _ensure_registered(spark)
    from tablestore.spark import warm_up

    warm_up.start(spark)   # the Python processes of a first write, started in the background (warm_up.py)
    return spark


def catalog_environment(settings: Mapping[str, str]) -> dict[str, str]:
    """The Spark settings that hand the catalog options among `settings` (``spark.sql.catalog.managed.s3.*``, over
    those already in TABLESTORE_CATALOG_OPTIONS, e.g. the CLI's --option) to every process of the job: that
    environment variable of this driver (which the JVM and its Python workers inherit) and of the executors
    (`spark.executorEnv.`), and S3A's `spark.hadoop.fs.s3a.*` (an explicit S3A setting wins)."""
    import json

    from catalog import CATALOG_OPTIONS_ENV, environment_catalog_options, is_catalog_option
    from tablestore.spark.s3a import hadoop_options

    prefix = f"{CATALOG_CONF}."
    given = {**environment_catalog_options(),
             **{k[len(prefix):]: v for k, v in settings.items() if k.startswith(prefix) and is_catalog_option(k[len(prefix):])}}
    if not given:
        return {}
    text = json.dumps(given, sort_keys=True)
    os.environ[CATALOG_OPTIONS_ENV] = text
    s3a = {f"spark.hadoop.{k}": v for k, v in hadoop_options(given.items()).items()}
    return {f"spark.executorEnv.{CATALOG_OPTIONS_ENV}": text, **{k: v for k, v in s3a.items() if k not in settings}}


def with_extension(extensions: str | None) -> str:
    """`spark.sql.extensions` with the managed catalog's extension added (others, e.g. Delta's, are kept)."""
    listed = [e.strip() for e in (extensions or "").split(",") if e.strip()]
    return ",".join(listed if EXTENSIONS_CLASS in listed else [*listed, EXTENSIONS_CLASS])


_FIND_STATIC = ("import importlib.machinery, sys; "
                "sys.exit(0 if importlib.machinery.PathFinder.find_spec('pyspark_managed') else 3)")
"""Run by the workers' Python: whether a path entry holds `pyspark_managed` (the path finder alone, as PySpark's
lookup of data sources, `pkgutil.iter_modules()`, sees modules: an import hook does not count)."""


def _found_statically(spark: "SparkSession") -> bool:
    """Whether PySpark's lookup of data sources will find `managed`, asked of the workers' Python (10-50 ms):
    the lookup itself (Spark's first question about a Python data source) starts a worker that imports every
    `pyspark_*` module, tablestore with it, about 0.9 s that a session need not wait for (the first use of a
    `managed` table, or the background warm-up, pays it). False when that Python cannot tell."""
    python = spark.conf.get("spark.pyspark.python", None) or os.environ.get("PYSPARK_PYTHON") or "python3"
    try:
        return subprocess.run([python, "-c", _FIND_STATIC], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _ensure_registered(spark: "SparkSession") -> None:
    """Static registration needs `pyspark_managed` importable from a path entry of the workers' Python (an
    editable install's import hook hides it from PySpark's lookup): register it at runtime when it is not."""
    if _found_statically(spark):
        return
    try:
        found = spark._jsparkSession.sessionState().dataSourceManager().dataSourceExists("managed")
    except Exception:   # Spark Connect, or an internal API that moved: the runtime registration is harmless
        found = False
    if not found:
        from pyspark_managed import DefaultSource

        log.warning("PySpark's data-source lookup did not find the top-level module pyspark_managed (not on the "
                    "workers' sys.path?): registering the `managed` data source for this session only")
        spark.dataSource.register(DefaultSource)


def local_session(app_name: str = "tablestore", *, cores: int = 2, conf: Mapping[str, str] | None = None,
                  kafka: bool = False) -> "SparkSession":
    """A `local[cores]` session (one shuffle partition per core, no UI, 2 GB driver) with everything `session()`
    sets."""
    settings = {
        "spark.sql.shuffle.partitions": str(cores),
        "spark.ui.enabled": "false",
        "spark.driver.memory": "2g",
        **(conf or {}),
    }
    warehouse = settings.pop(WAREHOUSE_CONF, None)
    return session(warehouse, master=f"local[{cores}]", app_name=app_name, kafka=kafka, **settings)
