"""The `managed` streaming sink: exactly once across crashes of the driver (files and log), compaction within the
stop trigger, and an out-of-order changelog (the blog's case) through the upsert materializer."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, TopicPartition

import filestore
import tablestore
import tablestore.spark
from tablestore.faults import FAULT_ENV
from tablestore.spark.stream_read import ADMISSION_CONTROL

pytestmark = pytest.mark.spark

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("qty", pa.int32())])
DDL = "id BIGINT, name STRING, qty INT"
BOOTSTRAP = "table-storage.log.properties.bootstrap.servers"


def _write_batches(directory: Path, batches: list[list[dict[str, Any]]]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    start = time.time() - 1000
    for i, rows in enumerate(batches):
        path = directory / f"b{i:03d}.json"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
        os.utime(path, (start + i, start + i))  # the file source takes files in modification-time order


def _run_driver(warehouse: Path, source: Path, checkpoint: Path, bootstrap: str, fault: str | None,
                marker: Path | None, mode: str = "write", *options: str) -> str:
    """Run the driver (stream_driver.py); with a fault and a marker, kill its whole process group with SIGKILL once
    it stops at the fault point; with a fault and no marker, the process that reaches the point kills itself. How
    the run ended: "killed", "finished", or "failed" and the end of its stderr on the next lines."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop(FAULT_ENV, None)
    if fault is not None:
        env[FAULT_ENV] = fault if marker is None else f"{fault}:{marker}"
    err_file = tempfile.TemporaryFile("w+b")   # a file, not a pipe: a pipe nobody reads fills up and blocks the driver
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "stream_driver.py"), mode, str(warehouse), "db.orders", str(source),
         str(checkpoint), DDL if mode == "write" else "-", f"{BOOTSTRAP}={bootstrap}", *options],
        env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=err_file)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if marker is not None and marker.exists():
                os.killpg(proc.pid, signal.SIGKILL)  # kill -9 of the driver (JVM and Python workers too)
                proc.wait()
                return "killed"
            if proc.poll() is not None:
                err_file.seek(0)
                return "finished" if proc.returncode == 0 else "failed\n" + err_file.read().decode()[-3000:]
            time.sleep(0.2)
        raise AssertionError("the streaming driver did not finish in time")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        err_file.close()


def _log_records(table: tablestore.Table, bootstrap: str) -> list[tuple[int, int]]:
    """(partition, offset) of every committed record of the table's topic, read with a plain consumer."""
    describe: Any = table.describe()
    topic = describe["options"]["log.topic"]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stream-write-test",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(int(describe["bucket"]))])
        out: list[tuple[int, int]] = []
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 3:
            got = [m for m in consumer.consume(num_messages=1000, timeout=0.3) if m.error() is None]
            if got:
                quiet_since = time.monotonic()
            out += [(int(m.partition() or 0), int(m.offset() or 0)) for m in got]
        return out
    finally:
        consumer.close()


def _sorted_runs(table: tablestore.Table) -> dict[tuple[tuple[str, ...], int], int]:
    store = table._handle.store
    live = store.live_files(store.snapshots.latest())
    return filestore.sorted_run_counts(live, {(e.partition, e.bucket) for e in live.entries.values()})


@pytest.mark.version_independent
@pytest.mark.kafka
def test_a_driver_killed_at_each_commit_point_writes_every_change_once(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    warehouse = tmp_path / "wh"
    cat = tablestore.Catalog(str(warehouse), options={BOOTSTRAP: kafka_bootstrap})
    cat.create_database("db")
    table = cat.create_table("db.orders", SCHEMA, primary_key=["id"], options={
        "bucket": "2", "num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "3"})
    batches = [[{"id": b * 3 + i, "name": f"n{b}-{i}", "qty": b} for i in range(5)] for b in range(6)]
    _write_batches(tmp_path / "in", batches)
    checkpoint = tmp_path / "ck"
    try:
        # each run stops at the second time it reaches its point (the first commit of a run may be a replay)
        # the log is produced by the executors after the snapshot (tablestore/spark/log_publish.py): killed after
        # the snapshot before the log job (the same pending state as `before-log-commit`, which the driver-produced
        # log of tests/tablestore/test_prepared_commit.py covers), and after a bucket's transaction before the
        # log-only snapshot. First, the JVM's commit service (catalog/ServiceCommit.java) kills itself right after
        # batch 0's snapshot (no marker): the query fails, and the commit is not sent to a fresh service again,
        # which would take batch 0's committed files for a replay's and delete them (the reads below would miss them)
        runs = [("log-plans-written", None, "failed"), ("before-snapshot@2", "m", "killed"),
                ("log-plans-written@2", "m", "killed"), ("log-bucket-published@2", "m", "killed"),
                (None, None, "finished")]
        for i, (fault, marker, outcome) in enumerate(runs):
            ended = _run_driver(warehouse, tmp_path / "in", checkpoint, kafka_bootstrap, fault,
                                tmp_path / f"fault-{i}" if marker else None)
            assert ended.split("\n", 1)[0] == outcome, (fault, ended)
            if i == 0:
                assert "catalog service" in ended, ended   # the service's death is the query's error
                assert [s.commit_identifier for s in table.snapshots() if s.kind == "APPEND"] == [1]
        expected_rows = {}
        for rows in batches:
            expected_rows.update({r["id"]: r for r in rows})
        got = {r["id"]: r for r in table.read().to_pylist()}
        assert got == expected_rows
        # the log: every change of the 6 batches once (30 records), and `latest` readers lost none of them
        assert len(_log_records(table, kafka_bootstrap)) == 30
        assert table._handle.store.snapshots.latest().log_pending == ()   # every log published and recorded
        appends = [s for s in table.snapshots() if s.kind == "APPEND"]
        assert [s.commit_identifier for s in appends] == [1, 2, 3, 4, 5, 6]  # one snapshot per batch
        changes = list(table.read_changes(scan="full", timeout_s=1.0))
        latest: dict[int, dict[str, Any]] = {}
        for batch in changes:
            for r in batch.to_pylist():
                kind = r.pop("_row_kind")
                if kind in ("+I", "+U"):
                    latest[r["id"]] = r
                else:
                    latest.pop(r["id"], None)
        assert latest == expected_rows
        # streaming writes compact: no bucket above num-sorted-run.stop-trigger, and COMPACT snapshots were made
        assert max(_sorted_runs(table).values()) <= 3
        assert any(s.kind == "COMPACT" for s in table.snapshots())

        # a streaming read of the log into a Parquet sink, its driver killed in its third micro-batch's read,
        # then restarted from its checkpoint: every change of every commit once (needs several micro-batches:
        # PySpark >= 4.2's admission control splits the log by max-rows-per-trigger, at commit boundaries)
        if not ADMISSION_CONTROL:
            return
        out, read_ck = tmp_path / "read-out", tmp_path / "read-ck"
        read_options = ("scan=from-timestamp", "scan.timestamp-ms=0", "max-rows-per-trigger=5")
        assert _run_driver(warehouse, out, read_ck, kafka_bootstrap, "stream-read@3", tmp_path / "read-fault",
                           "read", *read_options) == "killed"
        assert _run_driver(warehouse, out, read_ck, kafka_bootstrap, None, tmp_path / "unused",
                           "read", *read_options) == "finished"
        delivered = _parquet_rows(out)
        state: dict[int, str] = {}
        expected = []
        for rows in batches:  # one commit each: new keys +I, changed rows -U old and +U new
            for r in rows:
                old = state.get(r["id"])
                expected += [("+I", r["id"], r["name"])] if old is None else [
                    ("-U", r["id"], old), ("+U", r["id"], r["name"])] if old != r["name"] else []
                state[r["id"]] = r["name"]
        assert delivered == sorted(expected)
    finally:
        cat.drop_table("db.orders")


def _parquet_rows(directory: Path) -> list[tuple[str, int, str]]:
    """The rows a Spark file sink committed (the files its `_spark_metadata` log lists: a killed batch's partial
    files are not part of the output)."""
    import glob

    committed: set[str] = set()
    for log_file in sorted(glob.glob(str(directory / "_spark_metadata" / "*"))):
        for line in Path(log_file).read_text().splitlines()[1:]:
            committed.add(Path(json.loads(line)["path"]).name)
    table = pa.concat_tables([pq.read_table(directory / name) for name in sorted(committed)])
    return sorted((r["_row_kind"], r["id"], r["name"]) for r in table.to_pylist())


def test_out_of_order_changelog_through_the_materializer_ends_correct(
        spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    """The blog's join output for id=1 (level 10 -> 20, attr a1 -> b1) arriving as +I, +U, then the -U of the old
    row (scenario 3): applied as is, the -U deletes id=1; through the materializer the table keeps (1, 20, b1)."""
    cat = tablestore.Catalog(str(spark_warehouse))
    cat.create_database("db", ignore_if_exists=True)
    schema = pa.schema([pa.field("id", pa.int64(), False), ("level", pa.int64()), ("attr", pa.string())])
    events = [{"_row_kind": "+I", "id": 1, "level": 10, "attr": "a1"},
              {"_row_kind": "+U", "id": 1, "level": 20, "attr": "b1"},
              {"_row_kind": "-U", "id": 1, "level": 10, "attr": "a1"},
              {"_row_kind": "+I", "id": 2, "level": 20, "attr": "b1"}]
    _write_batches(tmp_path / "in", [[e] for e in events])  # one event per micro-batch: a fixed arrival order
    results = {}
    for mode in ("auto", "none"):
        table = cat.create_table(f"db.blog_{mode}", schema, primary_key=["id"], options={"bucket": "1"})
        source = (spark.readStream.schema("_row_kind STRING, id BIGINT, level BIGINT, attr STRING")
                  .option("maxFilesPerTrigger", 1).json(str(tmp_path / "in")))
        # the join's output is shuffled by `level`: its upsert key is unknown (None)
        df = tablestore.spark.materialize_for_sink(source, table.name, upsert_key=None, upsert_materialize=mode)
        query = (df.writeStream.format("managed").option("checkpointLocation", str(tmp_path / f"ck-{mode}"))
                 .trigger(availableNow=True).start(table.name))
        query.awaitTermination(240)
        assert query.exception() is None
        results[mode] = sorted((r["id"], r["level"], r["attr"]) for r in table.read().to_pylist())
    assert results["auto"] == [(1, 20, "b1"), (2, 20, "b1")]
    assert results["none"] == [(2, 20, "b1")]  # what the materializer prevents: id=1 deleted by its late -U


def test_needs_materializer_rule() -> None:
    from tablestore.spark.sink import needs_materializer

    pk = ["id"]
    assert needs_materializer("auto", changelog=True, primary_key=pk, upsert_key=None)
    assert needs_materializer("auto", changelog=True, primary_key=pk, upsert_key=["level"])
    assert not needs_materializer("auto", changelog=True, primary_key=pk, upsert_key=["id"])
    assert not needs_materializer("auto", changelog=False, primary_key=pk, upsert_key=None)
    assert not needs_materializer("none", changelog=True, primary_key=pk, upsert_key=None)
    assert needs_materializer("force", changelog=True, primary_key=pk, upsert_key=["id"])


@pytest.mark.kafka
def test_batch_writes_commit_through_the_session_log_and_compaction(
        spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    """A batch job's changes reach the log (one transaction from the driver) and its commit compacts."""
    warehouse = tmp_path / "wh"
    cat = tablestore.Catalog(str(warehouse), options={BOOTSTRAP: kafka_bootstrap})
    cat.create_database("db")
    table = cat.create_table("db.orders", SCHEMA, primary_key=["id"], options={
        "bucket": "2", "num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": "2"})
    try:
        for b in range(3):
            df = spark.createDataFrame([(b * 10 + i, f"n{b}", b) for i in range(20)], DDL).repartition(2)
            (df.write.format("managed").mode("append").option("warehouse", str(warehouse))
             .option(BOOTSTRAP, kafka_bootstrap).save("db.orders"))
        assert table.read().num_rows == 40  # ids 0..39 (batches overlap by 10)
        assert len(_log_records(table, kafka_bootstrap)) == 60
        assert max(_sorted_runs(table).values()) <= 2
        assert any(s.kind == "COMPACT" for s in table.snapshots())
        df = spark.createDataFrame([(100, "x", 1)], DDL)
        (df.write.format("managed").mode("append").option("warehouse", str(warehouse)).option(BOOTSTRAP, kafka_bootstrap)
         .option("change-tracking", "false").save("db.orders"))
        assert table.read().num_rows == 41 and len(_log_records(table, kafka_bootstrap)) == 60
    finally:
        cat.drop_table("db.orders")
