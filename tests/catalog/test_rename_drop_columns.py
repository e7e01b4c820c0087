"""`catalog.Catalog.rename_column` / `drop_column`: the schema each publishes (column ids kept, retired, never
reused), what they refuse (a SchemaEvolutionError naming the table and the column, nothing published), and schema
files written before column ids existed."""
from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import pytest

from catalog import Catalog, SchemaEvolutionError
from filestore import TableSchema

SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int8()), pa.field("s", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    c.create_table("db.t", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"])
    return c


def schema_files(cat: Catalog, table: str = "t") -> list[str]:
    return sorted(p.name for p in (Path(cat.root) / "db.db" / table / "schema").iterdir())


def test_rename_keeps_the_id_and_drop_retires_it(cat: Catalog) -> None:
    renamed = cat.rename_column("db.t", "v", "w").schema
    assert renamed.id == 1 and renamed.arrow_schema.names == ["id", "dt", "w", "s"]
    assert renamed.field_ids == (0, 1, 2, 3) and renamed.arrow_schema.field("w").type == pa.int8()
    dropped = cat.drop_column("db.t", "s").schema
    assert dropped.id == 2 and dropped.arrow_schema.names == ["id", "dt", "w"] and dropped.field_ids == (0, 1, 2)
    readded = cat.alter_table("db.t", add_columns=[pa.field("s", pa.string())]).schema
    assert readded.field_ids == (0, 1, 2, 4) and readded.highest_field_id == 4   # id 3 is never given again
    again = cat.rename_column("db.t", "w", "v").schema    # a former name is free once its column moved on
    assert again.arrow_schema.names == ["id", "dt", "v", "s"] and again.field_ids == (0, 1, 2, 4)
    on_disk = json.loads((Path(cat.root) / "db.db" / "t" / "schema" / "schema-4").read_text())
    assert [(f["id"], f["name"]) for f in on_disk["fields"]] == [(0, "id"), (1, "dt"), (2, "v"), (4, "s")]
    assert on_disk["highestFieldId"] == 4
    assert schema_files(cat) == [f"schema-{i}" for i in range(5)]


def test_drop_columns_is_one_schema(cat: Catalog) -> None:
    cat.alter_table("db.t", add_columns=[pa.field("a", pa.int64())])
    table = cat.drop_column("db.t", "s", "a")
    assert table.schema.id == 2 and table.schema.arrow_schema.names == ["id", "dt", "v"]
    assert table.schema.highest_field_id == 4 and schema_files(cat) == ["schema-0", "schema-1", "schema-2"]


def test_rename_to_itself_is_no_change(cat: Catalog) -> None:
    assert cat.rename_column("db.t", "v", "v").schema.id == 0 and schema_files(cat) == ["schema-0"]


@pytest.mark.parametrize("change, words", [
    (lambda c: c.rename_column("db.t", "id", "key"), ["'id'", "primary-key"]),
    (lambda c: c.drop_column("db.t", "id"), ["'id'", "primary-key"]),
    (lambda c: c.rename_column("db.t", "dt", "day"), ["'dt'", "primary-key"]),
    (lambda c: c.drop_column("db.t", "nope"), ["'nope'", "no such column"]),
    (lambda c: c.rename_column("db.t", "nope", "x"), ["'nope'", "no such column"]),
    (lambda c: c.rename_column("db.t", "v", "s"), ["'v'", "'s'", "has a column"]),
    (lambda c: c.rename_column("db.t", "v", "_row_kind"), ["'v'", "'_row_kind'", "reserved"]),
    (lambda c: c.rename_column("db.t", "v", ""), ["'v'", "not a column name"]),
    (lambda c: c.drop_column("db.t", "v", "v"), ["'v'", "twice"]),
    (lambda c: c.drop_column("db.t", "v", "id"), ["'id'", "primary-key"]),
])
def test_refused_changes_publish_nothing(cat: Catalog, change: object, words: list[str]) -> None:
    with pytest.raises(SchemaEvolutionError) as e:
        change(cat)  # type: ignore[operator]
    message = str(e.value)
    assert "\n" not in message and "'db.t'" in message and e.value.table == "db.t"
    assert all(w in message for w in words), message
    assert schema_files(cat) == ["schema-0"]


def test_partition_column(tmp_path: Path) -> None:
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    c.create_table("db.p", SCHEMA, partition_by=["dt"])
    with pytest.raises(SchemaEvolutionError, match="'dt'.*a partition column"):
        c.rename_column("db.p", "dt", "day")


def test_a_table_without_a_primary_key(tmp_path: Path) -> None:
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    c.create_table("db.a", pa.schema([("x", pa.int64()), ("y", pa.string())]))
    with pytest.raises(SchemaEvolutionError, match="'x'.*bucket-key"):
        c.rename_column("db.a", "x", "z")
    c.alter_table("db.a", add_columns=[pa.field("note", pa.string())])
    assert c.rename_column("db.a", "note", "remark").schema.arrow_schema.names == ["x", "y", "remark"]
    with pytest.raises(SchemaEvolutionError, match="'remark'.*whole row is its key"):
        c.drop_column("db.a", "remark")


def test_columns_named_by_options_stay(tmp_path: Path) -> None:
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.int64()), ("n", pa.int64()),
                        ("v", pa.string())])
    c.create_table("db.g", schema, primary_key=["id"],
                   options={"merge-engine": "aggregation", "fields.n.aggregate-function": "sum"})
    with pytest.raises(SchemaEvolutionError, match="'n'.*'fields.n.aggregate-function'"):
        c.drop_column("db.g", "n")
    c.create_table("db.s", schema, primary_key=["id"], options={"sequence.field": "ts"})
    with pytest.raises(SchemaEvolutionError, match="'ts'.*'sequence.field'"):
        c.rename_column("db.s", "ts", "t2")
    assert c.drop_column("db.s", "v").schema.arrow_schema.names == ["id", "ts", "n"]


def test_a_schema_file_without_column_ids_loads(cat: Catalog) -> None:
    """A schema file as the code before column ids wrote it: no "highestFieldId", fields listed by position."""
    path = Path(cat.root) / "db.db" / "t" / "schema" / "schema-0"
    d = json.loads(path.read_text())
    d.pop("highestFieldId")
    for f in d["fields"]:
        f.pop("id")
    path.write_text(json.dumps(d))
    old = cat.get_table("db.t").schema
    assert old.field_ids == (0, 1, 2, 3) and old.highest_field_id == 3
    assert cat.drop_column("db.t", "s").schema.highest_field_id == 3
    assert cat.alter_table("db.t", add_columns=[pa.field("s", pa.string())]).schema.field_ids == (0, 1, 2, 4)


def test_schema_json_round_trip_keeps_ids() -> None:
    s = TableSchema(3, SCHEMA, ("id", "dt"), ("dt",), {}, field_ids=(0, 1, 5, 7), highest_field_id=9)
    back = TableSchema.from_json(s.to_json())
    assert back == s and back.field_ids == (0, 1, 5, 7) and back.highest_field_id == 9
    assert TableSchema(0, SCHEMA).field_ids == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="column ids"):
        TableSchema(0, SCHEMA, field_ids=(0, 1, 1, 2))
    d = json.loads(s.to_json())
    assert base64.b64decode(d["arrowSchema"])   # the Arrow schema is kept as it was
