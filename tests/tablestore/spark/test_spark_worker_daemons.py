"""Spark's Python worker daemons fork every worker from a process with no other thread, on every supported
PySpark: a worker forked while another thread of its daemon holds a lock (jemalloc's, OpenBLAS's) can hang before
it connects back, and PySpark 4.1 then waits for it forever. 4.2 imports the worker module after the fork; on 4.1
`tablestore.spark.session` starts the JVM with an environment in which that import starts no thread
(tablestore/spark/sessions.py, FORK_SAFE_ENV)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hang_watchdog import command_of, descendants

import tablestore

pytestmark = pytest.mark.spark


def _daemons() -> dict[int, tuple[str, list[str]]]:
    """Every `pyspark.daemon` process below this one that is a daemon (not a worker it forked): its worker module
    and the names of its threads."""
    found: dict[int, tuple[str, list[str]]] = {}
    for pid in descendants(os.getpid()):
        command = command_of(pid)
        if "pyspark.daemon" not in command:
            continue
        try:
            parent = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
            threads = [(t / "comm").read_text().strip() for t in Path(f"/proc/{pid}/task").iterdir()]
        except (OSError, ValueError):
            continue   # a worker that just exited
        if "pyspark.daemon" not in command_of(parent):
            found[pid] = (command.split("pyspark.daemon")[-1].strip() or "pyspark.worker", threads)
    return found


def test_spark_s_python_worker_daemons_fork_from_a_single_thread(spark: Any, tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    table = cat.create_table("db.t", pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())]),
                             primary_key=["id"], options={"bucket": "2"})
    df = spark.createDataFrame([(i, str(i)) for i in range(100)], "id long, v string")
    df.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
    assert spark.read.format("managed").option("warehouse", str(tmp_path)).load(table.name).count() == 100
    daemons = _daemons()
    modules = {module for module, _ in daemons.values()}
    # a planner's daemon ran (the write's; its commit runs in the JVM's commit service, catalog/ServiceCommit.java)
    assert "pyspark.sql.worker.write_into_data_source" in modules
    assert "pyspark.sql.worker.commit_data_source_write" not in modules
    assert {pid: d for pid, d in daemons.items() if len(d[1]) != 1} == {}


def test_a_worker_that_loads_tablestore_keeps_its_modules_out_of_the_collectors_scans(spark: Any) -> None:
    """PySpark's daemon runs a full `gc.collect()` after each task of a reused worker: a worker that loaded
    tablestore's task modules has their objects frozen (tablestore/spark/pyworker.py), so the collection no longer
    scans them; the driver, which imported the same modules, freezes nothing."""
    import gc

    import tablestore.spark.write  # noqa: F401  (what a write task loads, here in the driver)

    def frozen(batches: Any) -> Any:
        import gc

        import tablestore.spark.write  # noqa: F401

        for _ in batches:
            pass
        yield pa.RecordBatch.from_pylist([{"frozen": gc.get_freeze_count(), "tracked": len(gc.get_objects())}])

    rows = spark.range(2).repartition(2).mapInArrow(frozen, "frozen long, tracked long").collect()
    assert len(rows) == 2
    for row in rows:
        assert row.frozen > 10_000 and row.tracked < row.frozen, row   # most of a worker's objects are frozen
    assert gc.get_freeze_count() == 0
