"""A session's Python processes started before its first query needs them.

PySpark starts the Python processes of a Python data source on first use, one after the other: the daemon of a
write's planner (`pyspark.sql.worker.write_into_data_source`), the daemon of the tasks' workers (`pyspark.worker`),
whose first worker then imports tablestore's writer, and the JVM's catalog and commit services
(catalog/PythonService.java). Each is a Python that starts and imports, about 1.3 s on 2 cores (PySpark 4.1), and
a query's first micro-batch paid them all after `start()` (docs/performance.md, "Session start and the first
micro-batch").

`session()` therefore starts them in a background thread right after the session is built:
- the catalog and commit services, side by side (`PythonService.warmUp()` starts each in a JVM thread);
- the planner's daemon and the tasks' daemon, with an empty `managed` write of a scratch table in a temporary
  warehouse (deleted after): planned, its tasks run (each imports tablestore's writer), committed with nothing to
  commit, so no snapshot, no file and none of the commit's fault points (tablestore/faults.py). PySpark keeps the
  tasks' workers, imports done, for the next tasks of a Python data source (`spark.python.worker.reuse`, on by
  default; it stops workers idle for a minute, not their daemon). A Python UDF's tasks have a daemon of their own
  (PySpark keys its daemons by the workers' environment): a `mapInArrow` warms that one, not this.
No table of the user's is touched. A query that needs a process while it is being started waits for it (PySpark
and the services start each once).

It waits for spare CPU: on a machine whose cores are all busy (a session's own start keeps 2 cores busy for
seconds) the warm-up's processes would only take turns with the user's first job, and a query started at once pays
the same either way. So by default (`spark.tablestore.warm-up=auto`) it starts once the machine's CPUs were at
least half idle for a second (Linux's /proc/stat; elsewhere at once) and gives up after a minute: a user who
types, or a service that starts its queries later, finds the processes running. `true` starts it at once,
`false` never. Local sessions only (a cluster's executors cannot see the driver's temporary directory).
"""
from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Callable

from tablestore.errors import TableStoreError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

SWITCH_CONF = "spark.tablestore.warm-up"
TABLE = "warm_up.t"

MODES = ("auto", "true", "false")
IDLE_WINDOW_S = 0.5
IDLE_WINDOWS = 2
IDLE_GIVE_UP_S = 60.0

_started: dict[str, threading.Thread] = {}
_lock = threading.Lock()


class WarmUpOptionError(TableStoreError, ValueError):
    """A `spark.tablestore.warm-up` setting that is not one of MODES."""


def mode(spark: "SparkSession") -> str:
    """The session's warm-up: `auto` (when the CPUs are idle), `true` (at once) or `false`; always `false` on a
    cluster."""
    switch = str(spark.conf.get(SWITCH_CONF, "auto")).strip().lower()
    if switch not in MODES:
        raise WarmUpOptionError(f"session setting {SWITCH_CONF}={switch!r}: expected one of {', '.join(MODES)}")
    return switch if str(spark.sparkContext.master).startswith("local") else "false"


def cpu_times() -> tuple[float, float] | None:
    """(idle, total) jiffies of all CPUs since boot, None where /proc/stat is not there."""
    try:
        with open("/proc/stat") as f:
            fields = [float(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + (fields[4] if len(fields) > 4 else 0.0), sum(fields[:8])


def wait_for_idle_cpus(sample: Callable[[], tuple[float, float] | None] = cpu_times,
                       sleep: Callable[[float], None] = time.sleep, give_up_s: float = IDLE_GIVE_UP_S) -> bool:
    """Whether the CPUs were at least half idle for IDLE_WINDOWS windows in a row before `give_up_s` (at once
    True where they cannot be sampled)."""
    last = sample()
    if last is None:
        return True
    quiet = 0
    waited = 0.0
    while waited < give_up_s:
        sleep(IDLE_WINDOW_S)
        waited += IDLE_WINDOW_S
        now = sample()
        if now is None:
            return True
        idle, total = now[0] - last[0], now[1] - last[1]
        last = now
        quiet = quiet + 1 if total > 0 and idle / total >= 0.5 else 0
        if quiet >= IDLE_WINDOWS:
            return True
    return False


def start(spark: "SparkSession") -> threading.Thread | None:
    """Start the warm-up of `spark`'s Python processes in a daemon thread, once per Spark application (None when
    it is off or was started before)."""
    when = mode(spark)
    if when == "false":
        return None
    with _lock:
        application = spark.sparkContext.applicationId
        if application in _started:
            return None
        thread = threading.Thread(target=_warm_up, args=(spark, when == "auto"), name="tablestore-warm-up",
                                  daemon=True)
        _started[application] = thread
    thread.start()
    return thread


def _warm_up(spark: "SparkSession", when_idle: bool) -> None:
    if when_idle and not wait_for_idle_cpus():
        log.debug("tablestore's warm-up gave up: the CPUs were busy for %s s", IDLE_GIVE_UP_S)
        return
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    _quietly(lambda: jvm.tablestore.spark.jvm.catalog.PythonService.warmUp())   # returns at once, both start
    _first_write(spark)


def _quietly(work: Callable[[], object]) -> None:
    try:
        work()
    except Exception as e:   # the session stopped meanwhile, or anything else: a warm-up never fails a job
        log.debug("tablestore's warm-up did not complete: %s", e)


def _first_write(spark: "SparkSession") -> None:
    """The empty write of a scratch table: the planner's daemon, the tasks' daemon and a worker with the writer
    imported."""
    import pyarrow as pa

    import tablestore
    from tablestore.spark.jvm_write import SWITCH as JVM_WRITER

    root = tempfile.mkdtemp(prefix="tablestore-warm-up-")

    def write() -> None:
        # a local property of this thread's jobs: Spark's UI names the warm-up's job
        spark.sparkContext.setJobDescription("tablestore warm-up (tablestore/spark/warm_up.py)")
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
