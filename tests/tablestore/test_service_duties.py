"""`tablestore service`'s duties, run in-process: dedicated compaction of write-only tables, snapshot expiry per the
options (and the service's overrides), orphan removal that spares the lease, the `tables` filter, new and dropped
tables, a failing duty that is recorded while the service goes on, and the write stall of a write-only writer."""
from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore.service import Intervals, Service, ServiceConfig, ServiceError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
FAST = Intervals(compaction_s=0.05, expiry_s=0.05, orphan_s=0.05)


def make(tmp_path: Path, name: str = "db.t", **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database(name.split(".")[0], ignore_if_exists=True)
    return cat.create_table(name, SCHEMA, primary_key=["id"], options={"log.system": "none", **options})


def write_n(t: tablestore.Table, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        t.write(pa.table({"id": [i, i + 1000], "v": [f"v{i}", "x"]}, schema=SCHEMA))


def max_runs(t: tablestore.Table) -> int:
    return max((n for p in t.describe()["partitions"] for n in p["sorted_runs"].values()), default=0)


def service(tmp_path: Path, **kwargs: object) -> Service:
    config = {"intervals": FAST, **kwargs}
    return Service(ServiceConfig(str(tmp_path), **config))  # type: ignore[arg-type]


def test_the_service_compacts_write_only_tables_and_only_those(tmp_path: Path) -> None:
    wo = make(tmp_path, "db.wo", **{"write-only": "true"})
    normal = make(tmp_path, "db.normal", **{"num-sorted-run.compaction-trigger": "20",
                                            "num-sorted-run.stop-trigger": "30"})
    write_n(wo, 7)
    write_n(normal, 7)
    assert max_runs(wo) == 7 and max_runs(normal) == 7
    s = service(tmp_path)
    s.run_once()
    assert max_runs(wo) < 7 and wo.snapshots()[-1].kind == "COMPACT"
    assert max_runs(normal) == 7   # its writers compact it (here: not yet, per its triggers), not the service
    assert set(s.held()) == {"db.wo", "db.normal"} and s.held()["db.wo"].runs["compaction"] == 1
    assert wo.read().num_rows == 14


def test_full_compaction_every_optimization_interval(tmp_path: Path) -> None:
    t = make(tmp_path, **{"write-only": "true", "compaction.optimization-interval": "200 ms",
                          "num-sorted-run.compaction-trigger": "10", "num-sorted-run.stop-trigger": "20"})
    write_n(t, 4)
    s = service(tmp_path)
    s.run_once()
    assert max_runs(t) == 4   # below the compaction trigger, and the first full compaction is one interval away
    time.sleep(0.25)
    s.run_once()
    assert max_runs(t) == 1 and s.held()["db.t"].runs["full-compaction"] == 1


def test_snapshot_expiry_honours_the_options_and_the_service_overrides(tmp_path: Path) -> None:
    t = make(tmp_path, **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    write_n(t, 6)
    before = [s.id for s in t.snapshots()]
    service(tmp_path, overrides={"snapshot.num-retained.min": "3"}).run_once()
    assert [s.id for s in t.snapshots()] == before[-3:]   # the override won over the table's own minimum of 1
    assert t.options["snapshot.num-retained.min"] == "1"   # the table itself is unchanged
    assert t.read().num_rows == 12


def test_orphans_are_removed_but_never_the_lease(tmp_path: Path) -> None:
    t = make(tmp_path)
    write_n(t, 1)
    orphan = Path(t.path) / "bucket-0" / "data-orphan.parquet"
    orphan.write_bytes(b"left by a crashed writer")
    old = time.time() - 3600
    os.utime(orphan, (old, old))
    s = service(tmp_path, overrides={"orphan-files.older-than": "1 min"})
    s.run_once()
    assert not orphan.exists()
    leases = sorted(p.name for p in (Path(t.path) / "service").iterdir())
    for p in (Path(t.path) / "service").iterdir():
        os.utime(p, (old, old))   # as old as the orphan: still spared
    time.sleep(0.06)
    s.run_once()
    assert leases and sorted(p.name for p in (Path(t.path) / "service").iterdir()) == leases
    assert t.read().num_rows == 2


def test_orphan_removal_keeps_young_files_by_default(tmp_path: Path) -> None:
    t = make(tmp_path)
    write_n(t, 1)
    young = Path(t.path) / "bucket-0" / "data-in-flight.parquet"
    young.write_bytes(b"a write in flight")
    service(tmp_path).run_once()   # orphan-files.older-than: 1 day
    assert young.exists()


def test_tables_filter_new_tables_and_dropped_ones(tmp_path: Path) -> None:
    make(tmp_path, "db.keep_a")
    make(tmp_path, "db.other")
    s = service(tmp_path, tables=r"db\.keep_.*")
    s.run_once()
    assert s.tables == ["db.keep_a"] and set(s.held()) == {"db.keep_a"}
    make(tmp_path, "db.keep_b")
    s.run_once()
    assert set(s.held()) == {"db.keep_a", "db.keep_b"}
    tablestore.Catalog(str(tmp_path)).drop_table("db.keep_a")
    s.run_once()
    assert set(s.held()) == {"db.keep_b"} and s.tables == ["db.keep_b"]
    assert not Path(tmp_path, "db.db", "keep_a").exists()   # no lease written into the dropped table's place


def test_a_bad_pattern_or_option_is_refused_at_start(tmp_path: Path) -> None:
    with pytest.raises(ServiceError, match="--tables"):
        service(tmp_path, tables="db.(")
    with pytest.raises(ServiceError, match="snapshot.num-retained.mni"):
        service(tmp_path, overrides={"snapshot.num-retained.mni": "1"})
    with pytest.raises(ServiceError, match="--option bucket: fixed when a table is created"):
        service(tmp_path, overrides={"bucket": "4"})


def test_a_failing_duty_is_recorded_and_the_service_goes_on(tmp_path: Path) -> None:
    broken = make(tmp_path, "db.broken", **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    fine = make(tmp_path, "db.fine", **{"snapshot.num-retained.min": "1", "snapshot.time-retained": "1 ms"})
    write_n(broken, 3)
    write_n(fine, 3)
    Path(broken.path, "snapshot", "snapshot-1").write_text("{not json")   # damaged metadata
    s = service(tmp_path).start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (s.errors and len(fine.snapshots()) == 1):
            time.sleep(0.05)
        assert len(fine.snapshots()) == 1   # the other table's duties ran
        errors = [e for e in s.errors if e.table == "db.broken"]
        assert errors and errors[0].duty == "snapshot-expiry" and "snapshot-1" in errors[0].error
        first = len(s.errors)
        time.sleep(0.3)
        assert len(s.errors) > first   # it keeps trying at each turn, and keeps running
        assert s.held()["db.broken"].errors["snapshot-expiry"] >= 2
    finally:
        s.stop()


def test_a_write_only_writer_waits_for_the_service_at_the_stop_trigger(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    t = make(tmp_path, **{"write-only": "true", "num-sorted-run.compaction-trigger": "2",
                          "num-sorted-run.stop-trigger": "3"})
    s = service(tmp_path, intervals=Intervals(compaction_s=0.3, expiry_s=60, orphan_s=60)).start()
    try:
        while not s.held():
            time.sleep(0.02)
        seen = []
        with caplog.at_level(logging.WARNING, logger="tablestore.write_stall"):
            for i in range(8):
                write_n(t, 1, start=i)
                seen.append(max_runs(t))
        assert max(seen) <= 3, seen   # never above the stop trigger after a write returned
        assert "waiting for the service's compaction" in caplog.text
    finally:
        s.stop()
    assert t.read().num_rows == 16


def test_without_a_service_a_write_only_writer_does_not_wait(tmp_path: Path) -> None:
    t = make(tmp_path, **{"write-only": "true", "num-sorted-run.compaction-trigger": "2",
                          "num-sorted-run.stop-trigger": "3"})
    done = threading.Event()
    threading.Thread(target=lambda: (write_n(t, 6), done.set()), daemon=True).start()
    assert done.wait(30) and max_runs(t) == 6


def test_the_service_expires_partitions(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False)])
    t = cat.create_table("db.p", schema, primary_key=["id", "dt"], partition_by=["dt"],
                         options={"log.system": "none", "partition.expiration-time": "7 d",
                                  "partition.expiration-check-interval": "100 ms"})
    t.write(pa.table({"id": [1, 2], "dt": ["2000-01-01", "2999-01-01"]}, schema=schema))
    s = service(tmp_path)
    s.run_once()
    assert t.read().column("dt").to_pylist() == ["2999-01-01"]
    assert s.held()["db.p"].runs["partition-expiry"] == 1 and not s.errors
