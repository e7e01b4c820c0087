"""Issue 11 items 8, 9 and 2 (key types): names follow one rule, numeric options their declared range, and a
primary key of a type without an order is refused when the table is created."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from catalog import ALL_OPTIONS, docgen
from catalog.identifiers import MAX_NAME_LENGTH
from tablestore import InvalidIdentifierError, InvalidOptionError, InvalidTableError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> tablestore.Catalog:
    c = tablestore.Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- item 8: names -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["db\n", "d\tb", "db\r", "\ndb", "é", "a" * (MAX_NAME_LENGTH + 1), "-db", "a b"])
def test_database_names_follow_the_rule(tmp_path: Path, name: str) -> None:
    c = tablestore.Catalog(str(tmp_path / "wh"))
    with pytest.raises(InvalidIdentifierError, match="letters, digits, '_' and '-'"):
        c.create_database(name)
    assert not (tmp_path / "wh").exists() or tree(tmp_path / "wh") == set()


@pytest.mark.parametrize("identifier", ["db.t\n", "db.t\r\n", "db\n.t", "db." + "t" * 300, "db.t\x00"])
def test_table_names_follow_the_rule(cat: tablestore.Catalog, tmp_path: Path, identifier: str) -> None:
    before = tree(tmp_path)
    with pytest.raises(InvalidIdentifierError, match=f"1 to {MAX_NAME_LENGTH} characters"):
        cat.create_table(identifier, SCHEMA)
    assert tree(tmp_path) == before


def test_the_longest_valid_name_works(cat: tablestore.Catalog) -> None:
    name = "t" * MAX_NAME_LENGTH
    t = cat.create_table(f"db.{name}", SCHEMA)
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["x"]}, schema=SCHEMA))
    assert cat.list_tables("db") == [name]


def test_partition_column_names_follow_the_rule(cat: tablestore.Catalog) -> None:
    schema = pa.schema([pa.field("a/b", pa.string()), ("v", pa.int64())])
    with pytest.raises(InvalidIdentifierError, match="partition column"):
        cat.create_table("db.t", schema, partition_by=["a/b"])


def test_a_partition_value_too_long_for_a_file_name_is_a_clear_error(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA, partition_by=["dt"])
    t.write(pa.table({"id": [1], "dt": ["ok"], "v": ["x"]}, schema=SCHEMA))
    with pytest.raises(tablestore.InvalidWriteError, match=r"partition value .* 'dt'.*255"):
        t.write(pa.table({"id": [2, 3], "dt": ["ok", "/" * 100], "v": ["y", "z"]}, schema=SCHEMA))
    assert t.read().to_pylist() == [{"id": 1, "dt": "ok", "v": "x"}]


# -- item 9: option ranges ---------------------------------------------------------------------------------------
@pytest.mark.parametrize(("key", "value"), [
    ("commit.max-retries", "-5"), ("target-file-size", "0"), ("target-file-size", "10 b"), ("bucket", "0"),
    ("write-buffer-size", "0"), ("snapshot.num-retained.min", "-1"), ("snapshot.num-retained.max", "-3"),
    ("num-sorted-run.compaction-trigger", "0"), ("manifest.merge-min-count", "0"),
    ("compaction.size-ratio", "-1"), ("compaction.max-size-amplification-percent", "-10"),
])
def test_numeric_options_out_of_range_are_refused(cat: tablestore.Catalog, key: str, value: str) -> None:
    with pytest.raises(InvalidOptionError, match=rf"{key}.*out of range; valid: >= \d+"):
        cat.create_table("db.t", SCHEMA, options={key: value})
    assert not cat.table_exists("db.t")
    with pytest.raises(InvalidOptionError, match=key):
        tablestore.Catalog(cat.warehouse, options={f"table-storage.{key}": value})


def test_every_numeric_table_option_declares_a_range_shown_on_the_page() -> None:
    page = docgen.render()
    for o in ALL_OPTIONS:
        if o.type in ("int", "memory", "duration"):
            assert o.min is not None, o.key
            assert f"| {o.valid_range} |" in page, o.key


def test_a_stored_option_out_of_range_fails_at_load_naming_the_table(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.t", SCHEMA)
    schema_file = Path(t.path) / "schema" / "schema-0"
    doc = json.loads(schema_file.read_text())
    doc["options"]["commit.max-retries"] = "-5"
    schema_file.write_text(json.dumps(doc))
    with pytest.raises(InvalidOptionError, match=r"db\.t.*commit\.max-retries.*out of range"):
        cat.get_table("db.t")


# -- item 2: key types -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("type_", [pa.list_(pa.int64()), pa.struct([("a", pa.int64())]),
                                   pa.map_(pa.string(), pa.int64()), pa.dictionary(pa.int32(), pa.string())])
def test_a_primary_key_without_an_order_is_refused_at_create(cat: tablestore.Catalog, type_: pa.DataType) -> None:
    schema = pa.schema([pa.field("k", type_, nullable=False), ("v", pa.int64())])
    with pytest.raises(InvalidTableError, match=rf"primary-key column 'k' has type {type_}.*no order"):
        cat.create_table("db.t", schema, primary_key=["k"])
    assert not cat.table_exists("db.t")
