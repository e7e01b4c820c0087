"""The service's lease per table (filestore.lease): two services share a warehouse's tables, one each; a service
that stops hands its tables over at once; one that dies (no release) loses them once its lease expires; the race
for a lease has one winner, on a local disk and on S3."""
from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from filestore import FileIO, S3Settings, TablePaths, acquire_lease, current_lease, renew_lease, service_active
from tablestore.service import Intervals, Service, ServiceConfig

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
FAST = Intervals(compaction_s=0.05, expiry_s=60, orphan_s=3600)


def make_tables(warehouse: str, names: list[str], options: dict[str, str] | None = None) -> None:
    cat = tablestore.Catalog(warehouse, options=options)
    cat.create_database("db", ignore_if_exists=True)
    for name in names:
        t = cat.create_table(name, SCHEMA, primary_key=["id"], options={"log.system": "none", "write-only": "true"})
        for i in range(6):   # above num-sorted-run.compaction-trigger: the service compacts
            t.write(pa.table({"id": [i], "v": ["x"]}, schema=SCHEMA))


def service(warehouse: str, timeout_s: float = 60, **kwargs: object) -> Service:
    return Service(ServiceConfig(warehouse, lease_timeout_s=timeout_s, intervals=FAST, **kwargs))  # type: ignore


def test_two_services_each_table_run_by_one(tmp_path: Path) -> None:
    names = [f"db.t{i}" for i in range(4)]
    make_tables(str(tmp_path), names)
    a, b = service(str(tmp_path)), service(str(tmp_path))
    with ThreadPoolExecutor(2) as pool:   # both race for every table
        list(pool.map(lambda s: s.run_once(), (a, b)))
    held_a, held_b = set(a.held()), set(b.held())
    assert held_a | held_b == set(names) and not held_a & held_b
    for name in names:
        t = tablestore.Catalog(str(tmp_path)).get_table(name)
        users = {s.commit_user for s in t.snapshots() if s.kind == "COMPACT"}
        assert len(users) == 1, (name, users)   # compacted by one service
    a.run_once(), b.run_once()
    assert set(a.held()) == held_a and set(b.held()) == held_b   # leases kept, not swapped


def test_a_stopped_service_hands_its_tables_over_at_once(tmp_path: Path) -> None:
    make_tables(str(tmp_path), ["db.t"])
    a = service(str(tmp_path)).start()
    while not a.held():
        time.sleep(0.02)
    b = service(str(tmp_path))
    b.run_once()
    assert not b.held()
    a.stop()   # releases the lease
    b.run_once()
    assert set(b.held()) == {"db.t"}


def test_a_killed_service_loses_its_tables_when_its_lease_expires(tmp_path: Path) -> None:
    make_tables(str(tmp_path), ["db.t", "db.u"])
    a = service(str(tmp_path), timeout_s=0.6)
    a.run_once()   # then "killed": it never runs again, never releases
    assert set(a.held()) == {"db.t", "db.u"}
    t = tablestore.Catalog(str(tmp_path)).get_table("db.t")
    paths = TablePaths(t.path)
    assert service_active(FileIO.from_url(str(tmp_path))[0], paths)
    b = service(str(tmp_path), timeout_s=0.6)
    b.run_once()
    assert not b.held()
    time.sleep(0.7)
    b.run_once()
    assert set(b.held()) == {"db.t", "db.u"}
    lease = current_lease(FileIO.from_url(str(tmp_path))[0], paths)
    assert lease is not None and lease.owner == b.owner
    a.run_once()   # back from the dead: its renewal is refused, it holds nothing
    assert not a.held() and set(b.held()) == {"db.t", "db.u"}


def _race(io: FileIO, root: str) -> None:
    paths = TablePaths(f"{root}/db.db/t")
    with ThreadPoolExecutor(6) as pool:
        won = list(pool.map(lambda i: acquire_lease(io, paths, f"service-{i}", 60_000), range(6)))
    winners = [w for w in won if w is not None]
    assert len(winners) == 1 and current_lease(io, paths) == winners[0]
    renewed = renew_lease(io, paths, winners[0], 60_000)
    assert renewed is not None and renewed.epoch == winners[0].epoch + 1
    assert renew_lease(io, paths, winners[0], 60_000) is None   # a stale holder's renewal is refused
    assert acquire_lease(io, paths, "service-other", 60_000) is None   # live: not taken


def test_the_race_for_a_lease_has_one_winner_on_a_local_disk(tmp_path: Path) -> None:
    io, root = FileIO.from_url(str(tmp_path))
    _race(io, root)


@pytest.mark.s3
def test_the_lease_on_s3(s3_warehouse: str, s3_server: object) -> None:
    settings = S3Settings(endpoint=s3_server.endpoint, access_key=s3_server.access_key,  # type: ignore[attr-defined]
                          secret_key=s3_server.secret_key, region="us-east-1",  # type: ignore[attr-defined]
                          path_style_access=True)
    io, root = FileIO.from_url(s3_warehouse, settings)
    _race(io, root)
    options = s3_server.catalog_options()  # type: ignore[attr-defined]
    make_tables(s3_warehouse, ["db.a", "db.b"], options)
    a = service(s3_warehouse, timeout_s=30.0, catalog_options=options)
    b = service(s3_warehouse, timeout_s=30.0, catalog_options=options)
    a.run_once()
    b.run_once()
    assert set(a.held()) == {"db.a", "db.b"} and not b.held()
    a.stop()   # releases its leases
    b.run_once()
    assert set(b.held()) == {"db.a", "db.b"}
    lease = current_lease(io, TablePaths(f"{root}/db.db/a"))
    assert lease is not None and lease.owner == b.owner and lease.live()
