"""A session's Python processes started before its first query needs them.

PySpark starts the Python processes of a Python data source on first use, one after the other: the daemon of a
write's planner (`pyspark.sql.worker.write_into_data_source`), the daemon of the tasks' workers (`pyspark.worker`),
whose first worker then imports tablestore's writer, and the JVM's catalog and commit services
(catalog/PythonService.java). Each is a Python that starts and imports, about 1.3 s on 2 cores (PySpark 4.1), and
a query's first micro-batch paid them all after `start()` (docs/performance.md, "Session start and the first
micro-batch").

`session()` therefore starts them in the background, side by side, right after the session is built:
- the catalog and commit services (`PythonService.warmUp()`);
- the planner's daemon and the tasks' daemon, with an empty `managed` write of a scratch table in a temporary
  warehouse (deleted after): planned, its tasks run (each imports tablestore's writer), committed with nothing to
  commit, so no snapshot, no file and none of the commit's fault points (tablestore/faults.py). PySpark keeps the
  tasks' workers, imports done, for the next tasks of a Python data source (`spark.python.worker.reuse`, on by
  default; it stops workers idle for a minute, not their daemon). A Python UDF's tasks have a daemon of their own
  (PySpark keys its daemons by the workers' environment): a `mapInArrow` warms that one, not this.
No table of the user's is touched. A query that needs a process while it is being started waits for it (PySpark
and the services start each once).

Local sessions only (a cluster's executors cannot see the driver's temporary directory). The session setting
`spark.tablestore.warm-up=false` turns it off.
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SWITCH_CONF = "spark.tablestore.warm-up"
TABLE = "warm_up.t"

_started: dict[str, list[threading.Thread]] = {}
_lock = threading.Lock()


def enabled(spark: "SparkSession") -> bool:
    """Whether `spark` warms up: a local master and the switch not false."""
    switch = str(spark.conf.get(SWITCH_CONF, "true")).strip().lower()
    return switch != "false" and str(spark.sparkContext.master).startswith("local")


def start(spark: "SparkSession") -> list[threading.Thread]:
    """Start the warm-up of `spark`'s Python processes in daemon threads, once per Spark application (none when it
    is off or was started before)."""
    if not enabled(spark):
        return []
    with _lock:
        application = spark.sparkContext.applicationId
        if application in _started:
            return []
        threads = [threading.Thread(target=work, args=(spark,), name=f"tablestore-warm-up-{work.__name__[1:]}",
                                    daemon=True) for work in (_services, _planner)]
        _started[application] = threads
    for thread in threads:
        thread.start()
    return threads


def _quietly(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception as e:   # the session stopped meanwhile, or anything else: a warm-up never fails a job
        log.debug("tablestore's warm-up did not complete: %s", e)


def _services(spark: "SparkSession") -> None:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    _quietly(lambda: jvm.tablestore.spark.jvm.catalog.PythonService.warmUp())


def _planner(spark: "SparkSession") -> None:
    import pyarrow as pa

    import tablestore
    from tablestore.spark.jvm_write import SWITCH as JVM_WRITER

    root = tempfile.mkdtemp(prefix="tablestore-warm-up-")

    def write() -> None:
        catalog = tablestore.Catalog(root)
        catalog.create_database(TABLE.split(".")[0])
        catalog.create_table(TABLE, pa.schema([pa.field("id", pa.int64(), False)]), primary_key=["id"],
                             options={"bucket": "1", "log.system": "none"})
        (spark.range(0).write.format("managed").option("warehouse", root).option(JVM_WRITER, "false")
         .mode("append").save(TABLE))

    try:
        _quietly(write)
    finally:
        shutil.rmtree(root, ignore_errors=True)
