"""Renamed and dropped columns as a user of the Python API sees them: `Table.rename_column` / `drop_column` and
`Catalog.rename_column` / `drop_column`. Rows written before read their values under the new name, a dropped
column never comes back under a re-added name (before and after compaction), filters on either return the right
rows, a handle loaded before the change reads on or asks to be loaded again, the changes between snapshots carry
the new names; and a random sequence of changes reads as a replay by column id (hypothesis)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
from filestore import SchemaMismatchError
from tablestore.snapshot_changes import snapshot_changes

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("a", pa.int32()),
                    pa.field("c", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> tablestore.Catalog:
    c = tablestore.Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def by_id(t: tablestore.Table, filter: pc.Expression | None = None) -> dict[int, dict[str, Any]]:
    return {r["id"]: r for r in t.read(filter=filter).to_pylist()}


def test_rename_reads_old_and_new_files_before_and_after_compaction(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "a": pa.array([10, 20], pa.int32()), "c": ["x", "y"]}))
    t.rename_column("a", "b")
    assert t.schema.names == ["id", "b", "c"]
    t.write(pa.table({"id": [2, 3], "b": pa.array([21, 30], pa.int32()), "c": ["y2", "z"]}))
    want = {1: {"id": 1, "b": 10, "c": "x"}, 2: {"id": 2, "b": 21, "c": "y2"}, 3: {"id": 3, "b": 30, "c": "z"}}
    assert by_id(t) == want
    assert by_id(t, pc.field("b") == 10) == {1: want[1]}       # a filter on the renamed column
    assert by_id(t, pc.field("b") >= 21) == {2: want[2], 3: want[3]}
    t.compact(full=True)
    assert by_id(t) == want and by_id(cat.get_table("db.t"), pc.field("b") == 10) == {1: want[1]}


def test_a_dropped_column_never_comes_back(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    t.write(pa.table({"id": [1, 2], "a": pa.array([1, 2], pa.int32()), "c": ["x", "y"]}))
    t.drop_column("c")
    assert t.schema.names == ["id", "a"] and by_id(t) == {1: {"id": 1, "a": 1}, 2: {"id": 2, "a": 2}}
    t.add_column("c", pa.string())                     # the same name again: another column
    t.write(pa.table({"id": [3], "a": pa.array([3], pa.int32()), "c": ["x"]}))
    want = {1: {"id": 1, "a": 1, "c": None}, 2: {"id": 2, "a": 2, "c": None}, 3: {"id": 3, "a": 3, "c": "x"}}
    assert by_id(t) == want
    assert by_id(t, pc.field("c") == "x") == {3: want[3]}      # never row 1's dropped "x"
    assert by_id(t, pc.field("c").is_null()) == {1: want[1], 2: want[2]}
    t.compact(full=True)
    assert by_id(t) == want and by_id(t, pc.field("c") == "x") == {3: want[3]}


def test_a_table_without_a_primary_key_filters_by_id(cat: tablestore.Catalog) -> None:
    """File statistics prune by column id: the dropped column's statistics never prune the re-added one."""
    t = cat.create_table("db.a", pa.schema([("x", pa.int64())]))
    t.add_column("c", pa.string())
    t.write(pa.table({"x": [1, 2], "c": ["k", "k"]}))
    t.rename_column("c", "d")
    t.add_column("c", pa.string())
    t.write(pa.table({"x": [3], "d": ["m"], "c": ["k"]}))
    assert sorted(t.read(filter=pc.field("c") == "k").to_pylist(), key=str) == [{"x": 3, "d": "m", "c": "k"}]
    assert sorted(r["x"] for r in t.read(filter=pc.field("d") == "k").to_pylist()) == [1, 2]


def test_catalog_methods_return_the_changed_table(cat: tablestore.Catalog) -> None:
    cat.create_table("db.t", SCHEMA, primary_key=["id"])
    assert cat.rename_column("db.t", "a", "b").schema.names == ["id", "b", "c"]
    t = cat.drop_column("db.t", "c")
    assert t.schema.names == ["id", "b"] and cat.get_table("db.t").schema.names == ["id", "b"]
    with pytest.raises(tablestore.SchemaEvolutionError, match="table 'db.t': cannot drop column 'id'"):
        t.drop_column("id")


def test_a_handle_loaded_before(cat: tablestore.Catalog) -> None:
    """A handle loaded before a rename reads files written after it under its own names; a filter on a renamed
    column, or a column dropped since, is a SchemaMismatchError asking to load the table again."""
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    t.write(pa.table({"id": [1], "a": pa.array([1], pa.int32()), "c": ["x"]}))
    stale = cat.get_table("db.t")
    t.rename_column("a", "b")
    t.write(pa.table({"id": [2], "b": pa.array([2], pa.int32()), "c": ["y"]}))
    assert by_id(stale) == {1: {"id": 1, "a": 1, "c": "x"}, 2: {"id": 2, "a": 2, "c": "y"}}
    assert by_id(stale, pc.field("c") == "y") == {2: {"id": 2, "a": 2, "c": "y"}}
    with pytest.raises(SchemaMismatchError, match="load the table again"):
        by_id(stale, pc.field("a") == 2)
    t.drop_column("c")
    t.write(pa.table({"id": [3], "b": pa.array([3], pa.int32())}))
    with pytest.raises(SchemaMismatchError, match=r"\['c'\].*load the table again"):
        by_id(stale)
    assert by_id(t) == {1: {"id": 1, "b": 1}, 2: {"id": 2, "b": 2}, 3: {"id": 3, "b": 3}}


def test_snapshot_changes_after_a_rename_carry_the_new_name(cat: tablestore.Catalog) -> None:
    import catalog

    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"log.system": "none"})
    first = t.write(pa.table({"id": [1, 2], "a": pa.array([1, 2], pa.int32()), "c": ["x", "y"]}))
    t.rename_column("a", "b")
    t.drop_column("c")
    t.write(pa.table({"id": [1], "b": pa.array([5], pa.int32())}))
    store = catalog.Catalog(str(Path(cat.warehouse))).get_table("db.t").store
    assert first is not None
    diff = [c.to_pylist() for c in snapshot_changes(store, store.snapshots.get(first), store.snapshots.latest())]
    assert diff == [[{"_row_kind": "-U", "id": 1, "b": 1}, {"_row_kind": "+U", "id": 1, "b": 5}]]
    assert t.system_table("latest_changes").to_pylist() == [{"_row_kind": "-U", "id": 1, "b": 1},
                                                             {"_row_kind": "+U", "id": 1, "b": 5}]


# -- a random sequence of changes, compared with a replay by column id --------------------------------------------
_NAMES = ["p", "q", "r"]
_ops = st.lists(st.one_of(
    st.tuples(st.just("write"), st.lists(st.integers(0, 5), min_size=1, max_size=4), st.integers(0, 99)),
    st.tuples(st.just("rename"), st.integers(0, 5), st.sampled_from(_NAMES)),
    st.tuples(st.just("drop"), st.integers(0, 5), st.just("")),
    st.tuples(st.just("add"), st.integers(0, 5), st.sampled_from(_NAMES)),
    st.tuples(st.just("compact"), st.integers(0, 5), st.just("")),
), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops, vectors=st.booleans())
def test_reads_equal_a_replay_by_column_id(tmp_path_factory: pytest.TempPathFactory,
                                           ops: list[tuple[str, Any, Any]], vectors: bool) -> None:
    c = tablestore.Catalog(str(tmp_path_factory.mktemp("wh")))
    c.create_database("db")
    t = c.create_table("db.t", pa.schema([pa.field("id", pa.int64(), nullable=False), ("p", pa.int64())]),
                       primary_key=["id"], options={"bucket": "2", "deletion-vectors.enabled": str(vectors).lower()})
    columns: list[tuple[int, str]] = [(1, "p")]     # (id, name) of the value columns
    next_id = 2
    rows: dict[int, dict[int, int | None]] = {}      # key -> column id -> value
    for op, arg, extra in ops:
        if op == "write":
            data = {"id": arg, **{name: [extra + k + cid for k in arg] for cid, name in columns}}
            t.write(pa.table(data))
            for k in arg:
                rows[k] = {cid: extra + k + cid for cid, _ in columns}
        elif op == "rename" and columns:
            cid, old = columns[arg % len(columns)]
            if extra == old or extra in [n for _, n in columns]:
                continue
            t.rename_column(old, extra)
            columns = [(i, extra if i == cid else n) for i, n in columns]
        elif op == "drop" and columns:
            cid, name = columns[arg % len(columns)]
            t.drop_column(name)
            columns = [(i, n) for i, n in columns if i != cid]
        elif op == "add" and extra not in [n for _, n in columns]:
            t.add_column(extra, pa.int64())
            columns.append((next_id, extra))
            next_id += 1
        elif op == "compact":
            t.compact(full=True)
    want = {k: {"id": k, **{name: v.get(cid) for cid, name in columns}} for k, v in rows.items()}
    assert by_id(t) == want
    assert by_id(c.get_table("db.t")) == want
    if columns:
        cid, name = columns[-1]
        hits = {k for k, v in want.items() if v[name] is not None and v[name] >= 50}
        assert set(by_id(t, pc.field(name) >= 50)) == hits
