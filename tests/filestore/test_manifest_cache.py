"""The manifest cache of long-lived processes (filestore/manifest_cache.py): with it, a read plans from the manifests
it already parsed and reads only those new to it; what it reads is the same; a damaged manifest is never kept; it is
bounded; it is off unless a process enables it."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import filestore
import tablestore
from filestore import manifest_cache
from filestore.errors import CorruptFileError
from filestore.fileio import FileIO

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


@pytest.fixture
def cache() -> Iterator[filestore.ManifestCache]:
    yield filestore.enable_manifest_cache()
    filestore.disable_manifest_cache()


@pytest.fixture
def manifest_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The manifest files read from storage, in order."""
    reads: list[str] = []
    real = FileIO.read_bytes

    def counting(self: FileIO, path: str) -> bytes:
        if "/manifest/" in path:
            reads.append(path)
        return real(self, path)

    monkeypatch.setattr(FileIO, "read_bytes", counting)
    return reads


def table(tmp_path: Path, commits: int = 3) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"bucket": "2"})
    for i in range(commits):
        t.write(pa.table({"id": [i, 100 + i], "v": [f"a{i}", f"b{i}"]}, schema=SCHEMA))
    return t


def rows(t: tablestore.Table) -> list[tuple[int, str]]:
    out = t.read().sort_by("id")
    return list(zip(out["id"].to_pylist(), out["v"].to_pylist()))


def test_off_unless_a_process_enables_it(tmp_path: Path, manifest_reads: list[str]) -> None:
    assert manifest_cache.current() is None
    t = table(tmp_path)
    rows(t)
    first = len(manifest_reads)
    rows(t)
    assert first > 0 and len(manifest_reads) == 2 * first   # every read reads every manifest again


def test_a_read_plans_from_the_manifests_it_parsed(tmp_path: Path, cache: filestore.ManifestCache,
                                                   manifest_reads: list[str]) -> None:
    t = table(tmp_path)
    expected = rows(t)
    first = len(manifest_reads)
    assert rows(t) == expected and len(manifest_reads) == first   # nothing read again
    t.write(pa.table({"id": [0, 7], "v": ["new", "seven"]}, schema=SCHEMA))
    manifest_reads.clear()
    after = rows(t)
    assert after == sorted([*[r for r in expected if r[0] != 0], (0, "new"), (7, "seven")])
    # the new snapshot's manifest list and its new manifest: the older manifests come from the cache
    assert len(manifest_reads) == len(set(manifest_reads)) and 1 <= len(manifest_reads) <= 3
    assert cache.hits > 0 and len(cache) > 0


def test_a_damaged_manifest_is_never_kept(tmp_path: Path, cache: filestore.ManifestCache) -> None:
    t = table(tmp_path, commits=1)
    damaged = next(p for p in (Path(t.path) / "manifest").iterdir() if not p.name.startswith("manifest-list"))
    good = damaged.read_bytes()
    damaged.write_bytes(good[: len(good) // 2])
    for _ in range(2):
        with pytest.raises(CorruptFileError) as info:
            t.read()
        assert info.value.path == str(damaged)
    damaged.write_bytes(good)   # a repaired file is read as it is now
    assert rows(t) == [(0, "a0"), (100, "b0")]


def test_a_table_created_again_under_its_name_is_read_afresh(tmp_path: Path, cache: filestore.ManifestCache) -> None:
    t = table(tmp_path)
    rows(t)
    cat = tablestore.Catalog(str(tmp_path))
    cat.drop_table("db.t")
    again = cat.create_table("db.t", schema=SCHEMA, primary_key=["id"], options={"bucket": "2"})
    again.write(pa.table({"id": [5], "v": ["only"]}, schema=SCHEMA))
    assert rows(again) == [(5, "only")]


def test_the_least_recently_used_files_leave_first() -> None:
    c = filestore.ManifestCache(max_entries=5)
    c.put("a", [1, 2])
    c.put("b", [3, 4])
    assert c.get("a") == [1, 2]          # a is now the most recently used
    c.put("c", [5, 6])                   # 6 entries > 5: b leaves
    assert c.get("b") is None and c.get("a") == [1, 2] and c.get("c") == [5, 6] and c.entries == 4
    c.put("huge", list(range(6)))        # larger than the whole cache: never kept, nothing dropped for it
    assert c.get("huge") is None and c.entries == 4
    held = c.get("a")
    assert held is not None
    held.append(99)                      # callers get their own list
    assert c.get("a") == [1, 2]
    with pytest.raises(ValueError, match="at least one entry"):
        filestore.ManifestCache(max_entries=0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdef"), st.lists(st.integers(), max_size=4)), max_size=40),
       st.integers(min_value=1, max_value=8))
def test_bounded_and_never_wrong(puts: list[tuple[str, list[int]]], bound: int) -> None:
    c = filestore.ManifestCache(max_entries=bound)
    last: dict[str, list[int]] = {}
    for path, records in puts:
        c.put(path, records)
        last[path] = records
        assert c.entries <= bound
        assert c.entries == sum(max(1, len(r)) for r in (c.get(p) for p in "abcdef") if r is not None)
    for path, records in last.items():
        held = c.get(path)
        assert held is None or held == records
