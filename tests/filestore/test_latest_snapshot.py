"""The latest snapshot, read with as few requests as the LATEST hint allows (each is a round trip on S3): whatever the
hint says (missing, empty, current, behind, ahead, naming an expired snapshot), `latest()` is the snapshot
`latest_id()` names; with a current hint it takes three requests (the hint, a probe for a newer snapshot, the
snapshot), one fewer than finding the id and then reading it."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import catalog
from filestore.fileio import FileIO
from filestore.paths import TablePaths
from filestore.snapshot import SnapshotManager

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
COMMITS = 6


class CountingIO(FileIO):
    """A local FileIO counting the requests an object store would get."""

    def __init__(self) -> None:
        super().__init__(FileIO.from_url("/")[0].fs)
        self.requests = 0

    def read_bytes(self, path: str) -> bytes:
        self.requests += 1
        return super().read_bytes(path)

    def exists(self, path: str) -> bool:
        self.requests += 1
        return super().exists(path)

    def list_dir(self, path: str):  # type: ignore[no-untyped-def]
        self.requests += 1
        return super().list_dir(path)


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cat = catalog.Catalog(str(tmp_path_factory.mktemp("wh")))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    for i in range(COMMITS):
        w = t.store.new_write()
        w.write(pa.table({"id": [i], "v": [str(i)]}, schema=SCHEMA))
        t.store.new_commit("u").publish(w.prepare_commit(), identifier=i)
    return Path(t.path)


def manager(root: Path) -> tuple[SnapshotManager, CountingIO]:
    io = CountingIO()
    return SnapshotManager(io, TablePaths(str(root)), "db.t"), io


@settings(max_examples=60, deadline=None)
@given(earliest=st.integers(1, COMMITS), hint=st.one_of(st.none(), st.just(""), st.integers(0, COMMITS + 3)))
def test_latest_is_what_latest_id_names_whatever_the_hint(table_dir: Path, earliest: int, hint: int | str | None
                                                          ) -> None:
    with tempfile.TemporaryDirectory() as d:
        root = Path(d) / "t"
        shutil.copytree(table_dir, root)
        for i in range(1, earliest):   # expired
            (root / "snapshot" / f"snapshot-{i}").unlink()
        latest_hint = root / "snapshot" / "LATEST"
        if hint is None:
            latest_hint.unlink()
        else:
            latest_hint.write_text(str(hint))
        snapshots, io = manager(root)
        found_id = snapshots.latest_id()
        assert found_id == COMMITS
        probing = io.requests + 1   # and then the snapshot's read
        io.requests = 0
        latest = snapshots.latest()
        requests = io.requests
        assert latest is not None and latest.id == COMMITS and latest == snapshots.get(COMMITS)
        if hint == COMMITS:
            assert requests == 3 == probing - 1
        elif hint is not None and hint != "" and earliest <= int(hint) < COMMITS:
            assert requests <= probing   # behind: probed forward as before


def test_an_empty_table_has_no_latest_snapshot(tmp_path: Path) -> None:
    cat = catalog.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    snapshots, _ = manager(Path(t.path))
    assert snapshots.latest() is None and snapshots.latest_id() is None
