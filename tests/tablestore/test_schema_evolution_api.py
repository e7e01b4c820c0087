"""The Python API of schema evolution: `Table.add_column` / `alter_column_type` and `Catalog.alter_table`, what the
same handle sees afterwards, writes with and without the new column, a write session opened before the change,
refusals as `tablestore.SchemaEvolutionError`, and the changes of files of several schemas (prepared commits,
snapshot diffs)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore.prepared import changes_of
from tablestore.snapshot_changes import snapshot_changes

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int32())])


@pytest.fixture
def cat(tmp_path: Path) -> tablestore.Catalog:
    c = tablestore.Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def by_id(t: tablestore.Table) -> dict[int, dict[str, object]]:
    return {r["id"]: r for r in t.read().to_pylist()}


def test_same_handle_sees_the_new_schema(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "v": pa.array([1, 2], pa.int32())}))
    t.add_column("note", pa.string())
    t.alter_column_type("v", pa.int64())
    assert t.schema == pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64()), ("note", pa.string())])
    assert by_id(t) == {1: {"id": 1, "v": 1, "note": None}, 2: {"id": 2, "v": 2, "note": None}}
    t.write(pa.table({"id": [2, 3], "v": [2**40, 3], "note": ["x", "y"]}))   # the handle's session was reopened
    t.write(pa.table({"id": [4], "v": [4]}))        # a writer without the new column: null in it
    assert by_id(t)[2] == {"id": 2, "v": 2**40, "note": "x"} and by_id(t)[4]["note"] is None
    assert t.describe()["columns"][-1] == {"name": "note", "type": "string", "nullable": True}
    t.add_column("note", pa.string())               # again (a restarted ingest job): nothing changes
    assert len([s for s in (Path(t.path) / "schema").iterdir()]) == 3
    assert cat.get_table("db.t").schema == t.schema


def test_catalog_alter_table_returns_the_evolved_table(cat: tablestore.Catalog) -> None:
    cat.create_table("db.t", SCHEMA, primary_key=["id"])
    t = cat.alter_table("db.t", add_columns=[pa.field("a", pa.float32()), pa.field("b", pa.string())],
                        alter_column_types={"v": pa.int64()})
    assert t.schema.names == ["id", "v", "a", "b"] and t.schema.field("v").type == pa.int64()
    t.add_column("c", pa.int8())   # a Table from alter_table can evolve further
    assert cat.get_table("db.t").schema.names == ["id", "v", "a", "b", "c"]


@pytest.mark.parametrize("change, words", [
    (lambda t: t.add_column("v", pa.string()), ["'v'", "int32", "string"]),
    (lambda t: t.alter_column_type("v", pa.string()), ["'v'", "int32", "string", "only widening"]),
    (lambda t: t.alter_column_type("v", pa.int16()), ["'v'", "int32", "int16"]),
    (lambda t: t.alter_column_type("id", pa.decimal128(30, 0)), ["'id'", "int64", "primary-key"]),
    (lambda t: t.add_column("_row_kind", pa.string()), ["'_row_kind'", "reserved"]),
])
def test_refusals_are_schema_evolution_errors(cat: tablestore.Catalog, change: object, words: list[str]) -> None:
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    with pytest.raises(tablestore.SchemaEvolutionError) as caught:
        change(t)  # type: ignore[operator]
    assert "table 'db.t'" in str(caught.value) and all(w in str(caught.value) for w in words)
    assert isinstance(caught.value, tablestore.CatalogError)
    assert t.schema == SCHEMA


def test_session_opened_before_the_change_keeps_working(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    session = t.log_writer()
    session.write(pa.table({"id": [1], "v": pa.array([1], pa.int32())}))
    session.commit()
    t.add_column("note", pa.string())
    t.write(pa.table({"id": [1, 2], "v": [1, 2], "note": ["a", "b"]}))
    session.write(pa.table({"id": [2, 3], "v": pa.array([20, 30], pa.int32())}))   # schema 0's rows: note null
    session.commit()
    session.close()
    assert by_id(t) == {1: {"id": 1, "v": 1, "note": "a"}, 2: {"id": 2, "v": 20, "note": None},
                        3: {"id": 3, "v": 30, "note": None}}
    assert {f["file"]: f for f in t.files()} and t.compact(full=True) is not None
    assert by_id(t)[3] == {"id": 3, "v": 30, "note": None}


def test_changes_of_files_of_an_older_schema(cat: tablestore.Catalog) -> None:
    """A prepared commit (Spark tasks) of files written under an older schema: their log records carry the new
    columns as null, widened values cast."""
    import catalog

    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    old = catalog.Catalog(str(Path(cat.warehouse))).get_table("db.t").store
    w = old.new_write()
    w.write(pa.table({"id": [1, 2], "v": pa.array([1, 2], pa.int32())}), None)
    messages = w.prepare_commit()
    t.add_column("note", pa.string())
    t.alter_column_type("v", pa.int64())
    new = catalog.Catalog(str(Path(cat.warehouse))).get_table("db.t").store
    ((got, buckets),) = list(changes_of(new.context, messages))
    assert got.to_pylist() == [{"_row_kind": "+I", "id": 1, "v": 1, "note": None},
                               {"_row_kind": "+I", "id": 2, "v": 2, "note": None}]
    assert got.schema.field("v").type == pa.int64() and list(buckets) == [0, 0]


def test_snapshot_changes_across_an_alter(cat: tablestore.Catalog) -> None:
    import catalog

    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"log.system": "none"})
    first = t.write(pa.table({"id": [1, 2], "v": pa.array([1, 2], pa.int32())}))
    t.add_column("note", pa.string())
    t.write(pa.table({"id": [1], "v": [1], "note": ["x"]}))
    store = catalog.Catalog(str(Path(cat.warehouse))).get_table("db.t").store
    assert first is not None
    diff = [c.to_pylist() for c in snapshot_changes(store, store.snapshots.get(first), store.snapshots.latest())]
    assert diff == [[{"_row_kind": "-U", "id": 1, "v": 1, "note": None},
                     {"_row_kind": "+U", "id": 1, "v": 1, "note": "x"}]]
