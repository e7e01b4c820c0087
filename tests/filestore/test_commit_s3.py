"""The crash matrix's object-store row: a commit crashing at every IO step on a real S3 server (SeaweedFS) leaves the
previous table or the complete commit, a retry lands once, orphan removal clears the rest.

Modes "before" and "after" only: an S3 PUT is all or nothing (a crash during it leaves no object, which is "before"),
so the torn writes of the local row cannot happen here."""
from __future__ import annotations

import time

import pyarrow as pa
import pytest

import catalog
import tablestore
from faulty_io import FaultPlan, FaultyFileIO, InjectedCrash
from s3_server import S3Server
from test_commit import CHANGE, SCHEMA, data, with_io
from tablestore.table import Table

pytestmark = pytest.mark.s3


def _load(warehouse: str, server: S3Server) -> catalog.CatalogTable:
    return catalog.Catalog(warehouse, server.catalog_options()).get_table("db.t")


def _rows(warehouse: str, server: S3Server) -> list[dict[str, object]]:
    t = tablestore.Catalog(warehouse, server.catalog_options()).get_table("db.t")
    return t.read().sort_by([("id", "ascending"), ("p", "ascending")]).to_pylist()


def _seed(warehouse: str, server: S3Server) -> None:
    cat = catalog.Catalog(warehouse, server.catalog_options())
    cat.create_database("db")
    handle = cat.create_table("db.t", SCHEMA, primary_key=["id", "p"], partition_by=["p"],
                              options={"write-only": "true", "bucket": "2", "manifest.merge-min-count": "3"})
    t = Table(handle)
    t.write(data(range(6)))
    t.write(data(range(4, 9), p="b", v="y"))
    t.write(pa.table({"id": [1, 5], "p": ["a", "b"], "v": [None, None], "_row_kind": ["-D", "-D"]}))


def _attempt(warehouse: str, server: S3Server, plan: FaultPlan) -> int | None:
    handle = _load(warehouse, server)
    store = with_io(handle, FaultyFileIO.wrapping(handle.store.io, plan))
    w = store.new_write()
    w.write(CHANGE)
    return store.new_commit("crashy").commit(w.prepare_commit(), identifier=1)


@pytest.mark.parametrize("mode", ["before", "after"])
def test_crash_at_every_io_step_on_s3_leaves_the_previous_table_or_the_complete_commit(
    s3_warehouse: str, s3_server: S3Server, mode: str
) -> None:
    fs = s3_server.fs()
    template = f"{s3_warehouse}/template"
    _seed(template, s3_server)
    before = _rows(template, s3_server)

    def copy(name: str) -> str:
        target = f"{s3_warehouse}/{name}"
        fs.copy(template.removeprefix("s3://"), target.removeprefix("s3://"), recursive=True)
        return target

    dry = copy("dry")
    dry_plan = FaultPlan()
    assert _attempt(dry, s3_server, dry_plan) == 4
    after = _rows(dry, s3_server)
    assert after != before
    steps = dry_plan.calls
    publish = next(i for i, c in enumerate(steps) if c.op == "create_exclusive" and "/snapshot/snapshot-" in c.path)
    assert 0 < publish < len(steps) - 1   # data files and manifests before it, the LATEST hint after it

    for i, step in enumerate(steps):
        wh = copy(f"crash-{i}")
        with pytest.raises(InjectedCrash):
            _attempt(wh, s3_server, FaultPlan(crash_at=i, mode=mode))  # type: ignore[arg-type]
        published = i > publish or (i == publish and mode == "after")
        ids = [s.id for s in _load(wh, s3_server).store.snapshots.snapshots()]
        assert ids == ([1, 2, 3, 4] if published else [1, 2, 3]), (i, step)
        assert _rows(wh, s3_server) == (after if published else before), (i, step)

        assert _attempt(wh, s3_server, FaultPlan()) == 4, (i, step)   # the retry lands exactly once
        assert [s.id for s in _load(wh, s3_server).store.snapshots.snapshots()] == [1, 2, 3, 4]
        assert _rows(wh, s3_server) == after

        t = tablestore.Catalog(wh, s3_server.catalog_options()).get_table("db.t")
        removed = t.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)
        assert all("/schema/" not in p for p in removed)
        assert _rows(wh, s3_server) == after
