"""The latency workload of `bench/spark_peers.py` (run by `bench/peers_systems.py` in each system's process): from
a commit to a streaming reader of the table's changes having collected its rows.

The clock starts when the commit becomes visible: the modification time of the first commit file the write added
or rewrote (`System.commit_files`: our snapshot file, Paimon's snapshot file, Delta's `_delta_log` JSON, the
Parquet job's `_SUCCESS`). A write may keep working after that (Delta writes its checksum file and, every tenth
version, a checkpoint; ours may compact) and a reader may see the commit before the write returns, so the time
from the write's return is measured too, and reported as a workload of its own."""
from __future__ import annotations

import glob
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from peers_systems import System

COMMITS = 15   # the default of `bench/spark_peers.py --commits`: a median of 5 moved by 20-30% between runs
UPDATED = 500   # of each latency commit's 1,000 rows: updates of existing keys (the rest: new keys)


def latency(system: System, spark: Any, t: str, data: Path, timings: dict[str, Any], commits: int = COMMITS) -> None:
    """From the end of a commit (a write of 1,000 changes returned) to a streaming reader of the table's changes
    (started before, polling as fast as it can) having collected those rows: the median of `commits` commits into a
    table holding the base rows (1M at scale 1), each commit updating UPDATED existing keys spread over the table
    and inserting the rest as new keys."""
    system.create(spark, t, changes=True)
    system.insert(spark, t, "base_src")
    system.feed(spark, t)
    base_rows = pq.read_metadata(data / "base.parquet").num_rows
    arrived: dict[str, float] = {}

    def sink(df: Any, _: int) -> None:
        marks = [row.c for row in df.select("c").where("c LIKE 'mark-%'").distinct().collect()]
        now = time.time()   # the rows collected: the reader has them
        for mark in marks:
            arrived.setdefault(mark, now)

    query = (system.changes(spark, t).writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(system.work / "checkpoints" / t)).start())
    waits, from_return = [], []
    rng = np.random.default_rng(11)
    try:
        deadline = time.time() + 300
        while not _idle(query) and time.time() < deadline:   # the reader's first batch (the rows there are) done
            time.sleep(0.05)
        for i in range(commits):
            mark = f"mark-{i}"
            batch = system.work / "latency" / f"{t}-{i}.parquet"
            ids = [int(k) for k in rng.choice(base_rows, UPDATED, replace=False)]
            ids += [10**12 + i * 1000 + j for j in range(1000 - UPDATED)]
            spark.createDataFrame([(k, j, 0.0, mark, "+I") for j, k in enumerate(ids)],
                                  "id BIGINT, a BIGINT, b DOUBLE, c STRING, op STRING").write.parquet(str(batch))
            before = _mtimes(system.commit_files(t))
            system.upsert(spark, t, str(batch))
            committed = time.time()
            after = _mtimes(system.commit_files(t))
            visible = min(m for f, m in after.items() if before.get(f) != m)
            while mark not in arrived:
                if query.exception() is not None:
                    raise RuntimeError(f"{system.key}: the change stream failed: {query.exception()}")
                if time.time() > committed + 120:
                    raise RuntimeError(f"{system.key}: commit {i} not seen by the change stream in 120 s")
                time.sleep(0.01)
            waits.append(arrived[mark] - visible)
            from_return.append(arrived[mark] - committed)
    finally:
        query.stop()
    form = (f"median of {commits} commits of 1,000 rows ({UPDATED} updates) into {base_rows:,} rows, until the "
            f"reader collected them; {system.changes_form}")
    timings["commit to change stream (median)"] = {
        "seconds": sorted(waits)[len(waits) // 2], "rows": 1000, "form": f"from the commit file's time; {form}",
        "all": waits}
    timings["write return to change stream (median)"] = {
        "seconds": sorted(from_return)[len(from_return) // 2], "rows": 1000,
        "form": f"from the write's return (negative: the reader had the rows first); {form}", "all": from_return}


def _mtimes(pattern: str) -> dict[str, float]:
    """The modification time (seconds since the epoch, as `time.time()`) of each file matching `pattern`."""
    return {f: os.stat(f).st_mtime_ns / 1e9 for f in glob.glob(pattern)}


def _idle(query: Any) -> bool:
    """Whether a streaming query has run its first batch and finds no more data for now."""
    status = query.status
    return (query.lastProgress is not None and not status["isDataAvailable"] and not status["isTriggerActive"])
