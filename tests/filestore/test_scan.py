"""Scan planning (filestore.scan): partition pruning and file skipping for a filter, never changing the result."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
import tablestore
from tablestore import SchemaMismatchError

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.int64())])


def new_table(warehouse: Path | str, *, pk: bool = True, bucket: int = 1, partitioned: bool = True
              ) -> tuple[tablestore.Table, catalog.CatalogTable]:
    cat = tablestore.Catalog(str(warehouse))
    cat.create_database("db", ignore_if_exists=True)
    key = (["id", "dt"] if partitioned else ["id"]) if pk else None
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=key, partition_by=["dt"] if partitioned else None,
                         options={"bucket": str(bucket), "write-only": "true"})
    return t, catalog.Catalog(str(warehouse)).get_table("db.t")


def batch(ids: range | list[int], dt: str, v: int | None = 0) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "dt": [dt] * len(ids), "v": [v if v is None else v + i for i in ids]}, schema=SCHEMA)


def planned_files(handle: catalog.CatalogTable, filter: pc.Expression | None = None) -> int:
    store = handle.store
    return sum(len(s.files) for s in store.new_scan().plan(store.snapshots.latest(), filter))


def sorted_rows(table: pa.Table) -> list[dict[str, Any]]:
    return sorted(table.to_pylist(), key=lambda r: (r["id"], r["dt"]))


def assert_same_as_filtering_everything(t: tablestore.Table, filter: pc.Expression) -> None:
    assert sorted_rows(t.read(filter=filter)) == sorted_rows(t.read().filter(filter))


def test_partition_pruning(tmp_path: Path) -> None:
    t, handle = new_table(tmp_path, bucket=2)
    for dt in ("2024-01-01", "2024-01-02", "2024-01-03"):
        t.write(batch(range(40), dt))
    everything = planned_files(handle)
    assert everything >= 6
    one_day = pc.field("dt") == "2024-01-02"
    pruned = handle.store.new_scan().plan(handle.store.snapshots.latest(), one_day)
    assert {s.partition for s in pruned} == {("2024-01-02",)}
    assert 0 < sum(len(s.files) for s in pruned) <= everything // 3
    assert planned_files(handle, pc.field("dt") > "2024-01-01") == everything - sum(len(s.files) for s in
        handle.store.new_scan().plan(handle.store.snapshots.latest(), pc.field("dt") == "2024-01-01"))
    assert planned_files(handle, pc.field("dt") == "1999-01-01") == 0
    result = t.read(filter=one_day)
    assert result.num_rows == 40 and set(result.column("dt").to_pylist()) == {"2024-01-02"}
    for f in (one_day, pc.field("dt").isin(["2024-01-01", "2024-01-03"]), pc.field("dt") == "nope"):
        assert_same_as_filtering_everything(t, f)


def test_key_range_skipping(tmp_path: Path) -> None:
    t, handle = new_table(tmp_path, partitioned=False)
    for start in range(0, 500, 100):  # five files with disjoint key ranges
        t.write(batch(range(start, start + 100), "d"))
    assert planned_files(handle) == 5
    assert planned_files(handle, pc.field("id") >= 420) == 1
    assert planned_files(handle, (pc.field("id") >= 150) & (pc.field("id") < 250)) == 2
    assert planned_files(handle, pc.field("id") == 1000) == 0
    assert planned_files(handle, pc.field("v") == 7) == 5  # value column: never used to skip on a PK table
    for f in (pc.field("id") >= 420, (pc.field("id") >= 150) & (pc.field("id") < 250), pc.field("id") == 1000,
              (pc.field("id") < 50) | (pc.field("id") > 480), pc.field("v") == 7):
        assert_same_as_filtering_everything(t, f)


def test_value_filter_does_not_resurrect_old_versions(tmp_path: Path) -> None:
    t, _ = new_table(tmp_path, partitioned=False)
    t.write(batch([1, 2], "d", v=None).set_column(2, "v", pa.array([1, 10], pa.int64())))
    t.write(batch([1], "d", v=None).set_column(2, "v", pa.array([2], pa.int64())))
    assert t.read(filter=pc.field("v") == 1).num_rows == 0
    assert t.read(filter=pc.field("v") == 2).to_pylist() == [{"id": 1, "dt": "d", "v": 2}]
    # a deleted key stays deleted under any filter
    t.write(pa.table({"id": [2], "dt": ["d"], "v": [None], "_row_kind": ["-D"]}))
    assert t.read(filter=pc.field("v") == 10).num_rows == 0
    assert t.read(filter=pc.field("id") == 2).num_rows == 0
    assert t.read(filter=pc.field("v").is_null()).num_rows == 0


def test_key_filter_keeps_every_version_of_a_key(tmp_path: Path) -> None:
    t, _ = new_table(tmp_path, partitioned=False)
    t.write(batch(range(0, 100), "d", v=0))
    t.write(batch(range(50, 60), "d", v=1000))
    t.write(pa.table({"id": [55], "dt": ["d"], "v": [None], "_row_kind": ["-D"]}))
    got = t.read(filter=(pc.field("id") >= 54) & (pc.field("id") <= 56))
    assert sorted_rows(got) == [{"id": 54, "dt": "d", "v": 1054}, {"id": 56, "dt": "d", "v": 1056}]


def test_tables_without_primary_key_skip_on_value_statistics(tmp_path: Path) -> None:
    t, handle = new_table(tmp_path, pk=False, partitioned=False)
    t.write(batch(range(10), "d", v=0))       # v in 0..9
    t.write(batch(range(10), "d", v=100))     # v in 100..109
    t.write(pa.table({"id": [1], "dt": ["d"], "v": [None]}, schema=SCHEMA))  # v all null
    assert planned_files(handle) == 3
    assert planned_files(handle, pc.field("v") > 50) == 1
    assert planned_files(handle, pc.field("v").is_null()) == 1
    for f in (pc.field("v") > 50, pc.field("v").is_null(), pc.field("v") < 5, pc.field("dt") == "x"):
        assert_same_as_filtering_everything(t, f)
    assert t.read(filter=pc.field("v").is_null()).to_pylist() == [{"id": 1, "dt": "d", "v": None}]


def test_null_bool_and_int_partitions_prune_correctly(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    schema = pa.schema([("id", pa.int64()), ("p", pa.int32()), ("b", pa.bool_())])
    t = cat.create_table("db.nulls", schema=schema, partition_by=["p", "b"], options={"write-only": "true"})
    t.write(pa.table({"id": [1, 2, 3, 4], "p": [1, None, 2, None], "b": [True, False, None, True]}, schema=schema))
    store = catalog.Catalog(str(tmp_path)).get_table("db.nulls").store
    assert sum(len(s.files) for s in store.new_scan().plan(store.snapshots.latest(), pc.field("p").is_null())) == 2
    for f in (pc.field("p").is_null(), pc.field("p") == 1, pc.field("b"), ~pc.field("b"), pc.field("b").is_null(),
              pc.field("p") != 1, pc.field("id") > 2, pc.field("p").is_valid() & pc.field("b")):
        got = sorted(t.read(filter=f).column("id").to_pylist())
        assert got == sorted(t.read().filter(f).column("id").to_pylist()), f


def test_invalid_filters_raise_a_typed_error(tmp_path: Path) -> None:
    t, handle = new_table(tmp_path)
    for _second_pass in (False, True):  # first on an empty table, then with rows
        for bad in (pc.field("nope") == 1, pc.field("v") > "text", pc.field("id") + 1):
            with pytest.raises(SchemaMismatchError, match="db.t"):
                t.read(filter=bad)
            with pytest.raises(SchemaMismatchError, match="db.t"):
                handle.store.new_read(filter=bad)
        t.write(batch(range(3), "a"))


ops = st.sampled_from(["==", "<", ">=", "!=", "isin", "null"])


def _expr(column: str, op: str, value: Any, other: Any) -> pc.Expression:
    f = pc.field(column)
    if op == "==":
        return f == value
    if op == "<":
        return f < value
    if op == ">=":
        return f >= value
    if op == "!=":
        return f != value
    if op == "isin":
        return f.isin([value, other])
    return f.is_null()


@st.composite
def filters(draw: st.DrawFn) -> pc.Expression:
    def atom() -> pc.Expression:
        column = draw(st.sampled_from(["id", "dt", "v"]))
        values = st.sampled_from(["a", "b", "c"]) if column == "dt" else st.integers(-5, 60)
        return _expr(column, draw(ops), draw(values), draw(values))

    expr = atom()
    for _ in range(draw(st.integers(0, 2))):
        expr = (expr & atom()) if draw(st.booleans()) else (expr | atom())
    return ~expr if draw(st.booleans()) else expr


writes = st.lists(
    st.lists(st.tuples(st.integers(0, 50), st.sampled_from(["a", "b", "c"]), st.integers(-5, 60) | st.none(),
                       st.sampled_from(["+I", "+U", "-D"])), min_size=1, max_size=15),
    min_size=1, max_size=5,
)


@SETTINGS
@given(writes, st.lists(filters(), min_size=1, max_size=4), st.booleans(), st.integers(1, 3))
def test_filtered_read_equals_filtering_the_full_read(
    commits: list[list[tuple[int, str, int | None, str]]], exprs: list[pc.Expression], pk: bool, bucket: int
) -> None:
    with tempfile.TemporaryDirectory() as wh:
        t, _ = new_table(wh, pk=pk, bucket=bucket)
        for rows in commits:
            t.write(pa.table({"id": [r[0] for r in rows], "dt": [r[1] for r in rows], "v": [r[2] for r in rows],
                              "_row_kind": [r[3] for r in rows]}))
        for expr in exprs:
            assert_same_as_filtering_everything(t, expr)
