"""The filesystem catalog as a user sees it through `tablestore.Catalog`: databases, tables, IF [NOT] EXISTS,
validation errors, options, and what happens on disk."""
from __future__ import annotations

import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from catalog import ALL_OPTIONS
from rename_case import rename_case
from tablestore import (
    CatalogError,
    DatabaseAlreadyExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    InvalidIdentifierError,
    InvalidOptionError,
    InvalidTableError,
    TableAlreadyExistsError,
    TableNotFoundError,
)

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> tablestore.Catalog:
    c = tablestore.Catalog(str(tmp_path))
    c.create_database("db")
    return c


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


# -- databases -------------------------------------------------------------------------------------------------
def test_create_list_drop_database(tmp_path: Path) -> None:
    c = tablestore.Catalog(str(tmp_path))
    assert c.list_databases() == []
    c.create_database("sales")
    c.create_database("a_b-c")
    assert c.list_databases() == ["a_b-c", "sales"]
    assert c.database_exists("sales") and not c.database_exists("nope")
    with pytest.raises(DatabaseAlreadyExistsError, match="sales"):
        c.create_database("sales")
    c.create_database("sales", ignore_if_exists=True)
    c.drop_database("sales")
    assert c.list_databases() == ["a_b-c"]
    assert not (tmp_path / "sales.db").exists()
    with pytest.raises(DatabaseNotFoundError, match="sales"):
        c.drop_database("sales")
    c.drop_database("sales", ignore_if_not_exists=True)
    with pytest.raises(DatabaseNotFoundError, match="nope"):
        c.list_tables("nope")
    with pytest.raises(DatabaseNotFoundError, match="nope"):
        c.create_table("nope.t", SCHEMA)


def test_non_empty_database_is_refused_unless_cascade(cat: tablestore.Catalog, tmp_path: Path) -> None:
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"])
    t.write(pa.table({"id": [1], "dt": ["x"], "v": ["a"]}, schema=SCHEMA))
    with pytest.raises(DatabaseNotEmptyError, match="t"):
        cat.drop_database("db")
    assert cat.list_tables("db") == ["t"] and t.read().num_rows == 1
    cat.drop_database("db", cascade=True)
    assert cat.list_databases() == []
    assert not (tmp_path / "db.db").exists()
    with pytest.raises(TableNotFoundError):
        cat.get_table("db.t")


def test_errors_share_one_root() -> None:
    for error in (DatabaseAlreadyExistsError, DatabaseNotEmptyError, DatabaseNotFoundError, InvalidIdentifierError,
                  InvalidOptionError, InvalidTableError, TableAlreadyExistsError, TableNotFoundError):
        assert issubclass(error, CatalogError)


# -- tables ----------------------------------------------------------------------------------------------------
def test_create_get_list_drop_table(cat: tablestore.Catalog, tmp_path: Path) -> None:
    t = cat.create_table("db.orders", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"], options={"bucket": "4"})
    table_dir = tmp_path / "db.db" / "orders"
    assert Path(t.path) == table_dir and (table_dir / "schema" / "schema-0").is_file()
    cat.create_table("db.customers", SCHEMA)
    assert cat.list_tables("db") == ["customers", "orders"]
    assert cat.table_exists("db.orders") and not cat.table_exists("db.nope")

    got = cat.get_table("db.orders")
    assert got.schema == SCHEMA
    assert (got.primary_key, got.partition_by, got.options["bucket"]) == (["id", "dt"], ["dt"], "4")
    assert got.name == "db.orders"

    with pytest.raises(TableAlreadyExistsError, match="db.orders"):
        cat.create_table("db.orders", SCHEMA)
    # IF NOT EXISTS returns the existing table, untouched
    other = pa.schema([pa.field("x", pa.int32(), nullable=False)])
    same = cat.create_table("db.orders", other, primary_key=["x"], ignore_if_exists=True)
    assert same.schema == SCHEMA and same.primary_key == ["id", "dt"]

    got.write(pa.table({"id": [1], "dt": ["d"], "v": ["a"]}, schema=SCHEMA))
    cat.drop_table("db.orders")
    assert not table_dir.exists()
    assert cat.list_tables("db") == ["customers"]
    with pytest.raises(TableNotFoundError, match="db.orders"):
        cat.get_table("db.orders")
    with pytest.raises(TableNotFoundError, match="db.orders"):
        cat.drop_table("db.orders")
    cat.drop_table("db.orders", ignore_if_not_exists=True)

    # a re-created table starts empty: nothing of the dropped one survives
    again = cat.create_table("db.orders", SCHEMA, primary_key=["id"])
    assert again.read().num_rows == 0 and again.snapshots() == []
    assert again.write(pa.table({"id": [2], "dt": ["d"], "v": ["b"]}, schema=SCHEMA)) == 1


def test_concurrent_create_of_the_same_table_has_one_winner(cat: tablestore.Catalog, tmp_path: Path) -> None:
    n = 8
    start = threading.Barrier(n)
    outcomes: list[object] = [None] * n

    def create(i: int) -> None:
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), (f"c{i}", pa.string())])
        start.wait()
        try:
            outcomes[i] = tablestore.Catalog(str(tmp_path)).create_table("db.race", schema, primary_key=["id"])
        except TableAlreadyExistsError as e:
            outcomes[i] = e

    threads = [threading.Thread(target=create, args=(i,)) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    winners = [i for i, o in enumerate(outcomes) if isinstance(o, tablestore.Table)]
    assert len(winners) == 1
    assert all(isinstance(o, TableAlreadyExistsError) for i, o in enumerate(outcomes) if i != winners[0])
    assert cat.get_table("db.race").schema.names == ["id", f"c{winners[0]}"]
    assert sorted(p.name for p in (tmp_path / "db.db" / "race" / "schema").iterdir()) == ["schema-0"]


def test_concurrent_create_database_has_one_winner(tmp_path: Path) -> None:
    n = 6
    start = threading.Barrier(n)
    errors: list[Exception] = []

    def create() -> None:
        start.wait()
        try:
            tablestore.Catalog(str(tmp_path)).create_database("shared")
        except DatabaseAlreadyExistsError as e:
            errors.append(e)

    threads = [threading.Thread(target=create) for _ in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(errors) == n - 1
    assert tablestore.Catalog(str(tmp_path)).list_databases() == ["shared"]


def test_any_fsspec_url_works_as_warehouse() -> None:
    url = f"memory://wh-{uuid.uuid4().hex}"
    c = tablestore.Catalog(url)
    c.create_database("db")
    t = c.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2, 1], "dt": ["a", "b", "c"], "v": ["x", "y", "z"]}, schema=SCHEMA))
    assert sorted(tablestore.Catalog(url).get_table("db.t").read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "dt": "c", "v": "z"}, {"id": 2, "dt": "b", "v": "y"}
    ]
    c.drop_table("db.t")
    assert c.list_tables("db") == []


# -- names -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["", "a/b", "..", ".", "a\\b", "../x", "a b", "x.y", "/abs"])
def test_database_names_cannot_escape_the_warehouse(tmp_path: Path, name: str) -> None:
    c = tablestore.Catalog(str(tmp_path / "wh"))
    before = tree(tmp_path)
    with pytest.raises(InvalidIdentifierError):
        c.create_database(name)
    assert tree(tmp_path) == before


@pytest.mark.parametrize("identifier", ["db.", "db", "db.a/b", "db...", "db.t.x", ".t", "db../x", "../db.t",
                                        "db.a\\b", "db.."])
def test_table_identifiers_cannot_escape_the_warehouse(cat: tablestore.Catalog, tmp_path: Path,
                                                       identifier: str) -> None:
    before = tree(tmp_path)
    for action in (
        lambda: cat.create_table(identifier, SCHEMA),
        lambda: cat.get_table(identifier),
        lambda: cat.drop_table(identifier, ignore_if_not_exists=True),
    ):
        with pytest.raises(InvalidIdentifierError):
            action()
    assert tree(tmp_path) == before


def test_a_symbolic_link_out_of_the_warehouse_is_never_followed(tmp_path: Path) -> None:
    """A database or table directory that is a link to a directory outside the warehouse: every operation through
    it fails naming it, and nothing outside is read, written or deleted (dropping its database removes the link)."""
    outside = tmp_path / "outside"
    elsewhere = tablestore.Catalog(str(outside))
    elsewhere.create_database("db")
    elsewhere.create_table("db.t", SCHEMA)
    before = tree(outside)
    wh = tmp_path / "wh"
    c = tablestore.Catalog(str(wh))
    c.create_database("mine")
    (wh / "linked.db").symlink_to(outside / "db.db")          # a database that leads outside
    (wh / "mine.db" / "t").symlink_to(outside / "db.db" / "t")   # a table that leads outside
    for action in (lambda: c.get_table("linked.t"), lambda: c.drop_database("linked", cascade=True),
                   lambda: c.drop_table("linked.t"), lambda: c.create_table("linked.new", SCHEMA),
                   lambda: c.get_table("mine.t"), lambda: c.drop_table("mine.t")):
        with pytest.raises(InvalidIdentifierError, match="outside the warehouse"):
            action()
    assert tree(outside) == before
    inside = wh / "mine.db" / "alias"   # a link that stays in the warehouse is a path like any other
    c.create_table("mine.real", SCHEMA)
    inside.symlink_to(wh / "mine.db" / "real")
    assert c.get_table("mine.alias").schema.names == ["id", "dt", "v"]
    c.drop_database("mine", cascade=True)   # removes the links themselves, never what they lead to
    assert not (wh / "mine.db").exists() and tree(outside) == before


# -- validation ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"primary_key": ["nope"]}, "nope"),
        ({"primary_key": ["v"], "schema": pa.schema([("v", pa.string())])}, "non-nullable"),
        ({"primary_key": ["id"], "partition_by": ["dt"]}, "part of the primary key"),
        ({"partition_by": ["missing"]}, "missing"),
        ({"primary_key": ["id", "id"]}, "repeat"),
        ({"schema": pa.schema([("_row_kind", pa.string())])}, "reserved"),
        ({"schema": pa.schema([("_SEQUENCE_NUMBER", pa.int64())])}, "reserved"),
        ({"schema": pa.schema([])}, "non-empty"),
        ({"options": {"bucket": "0"}}, "bucket"),
    ],
)
def test_invalid_table_definitions(cat: tablestore.Catalog, kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"schema": SCHEMA, **kwargs}
    with pytest.raises(CatalogError, match=message) as info:
        cat.create_table("db.bad", **args)  # type: ignore[arg-type]
    assert "db.bad" in str(info.value) or "bucket" in str(info.value)
    assert not cat.table_exists("db.bad")
    assert cat.list_tables("db") == []


def test_partition_columns_inside_the_primary_key_are_fine(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.ok", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"])
    assert t.partition_by == ["dt"]
    nopk = cat.create_table("db.nopk", SCHEMA, partition_by=["v"])
    assert nopk.primary_key == [] and nopk.partition_by == ["v"]


def test_unknown_option_lists_the_valid_ones(cat: tablestore.Catalog) -> None:
    with pytest.raises(InvalidOptionError) as info:
        cat.create_table("db.t", SCHEMA, options={"buckets": "2"})
    message = str(info.value)
    assert "buckets" in message and "did you mean 'bucket'" in message
    for option in ALL_OPTIONS:
        assert option.key in message
    assert not cat.table_exists("db.t")


@pytest.mark.parametrize(
    ("key", "value"),
    [("bucket", "two"), ("file.format", "csv"), ("write-buffer-size", "lots"), ("snapshot.time-retained", "1 fortnight"),
     ("target-file-size", "-1 mb"), ("write-only", "maybe")],
)
def test_bad_option_values_name_the_option(cat: tablestore.Catalog, key: str, value: str) -> None:
    with pytest.raises(InvalidOptionError, match=key):
        cat.create_table("db.t", SCHEMA, options={key: value})
    assert not cat.table_exists("db.t")


def test_option_values_parse_with_units(cat: tablestore.Catalog) -> None:
    given = {"write-buffer-size": "2 mb", "snapshot.time-retained": "30 min", "file.format": "orc"}
    t = cat.create_table("db.t", SCHEMA, options=given)
    assert {key: t.options[key] for key in given} == given
    from catalog import Catalog as InnerCatalog  # the typed options the file store runs with

    fs_options = InnerCatalog(str(Path(t.path).parents[1])).get_table("db.t").store.options
    assert (fs_options.write_buffer_size, fs_options.snapshot_time_retained_ms, fs_options.file_format) == (
        2 * 1024 * 1024, 30 * 60_000, "orc"
    )


# -- session options -------------------------------------------------------------------------------------------
def test_session_options_are_defaults_and_table_options_win(tmp_path: Path) -> None:
    session = tablestore.Catalog(str(tmp_path), options={"table-storage.bucket": "3",
                                                         "table-storage.file.format": "orc"})
    session.create_database("db")
    defaulted = session.create_table("db.a", SCHEMA, primary_key=["id"])
    overridden = session.create_table("db.b", SCHEMA, primary_key=["id"], options={"bucket": "1"})
    assert defaulted.options["bucket"] == "3" and overridden.options["bucket"] == "1"
    assert overridden.options["file.format"] == "orc"
    data = pa.table({"id": list(range(60)), "dt": ["d"] * 60, "v": ["x"] * 60}, schema=SCHEMA)
    defaulted.write(data)
    overridden.write(data)
    assert {p.name for p in Path(defaulted.path).glob("bucket-*")} == {"bucket-0", "bucket-1", "bucket-2"}
    assert {p.name for p in Path(overridden.path).glob("bucket-*")} == {"bucket-0"}
    assert all(f.suffix == ".orc" for f in Path(defaulted.path).rglob("data-*"))
    # options are stored with the table: another session sees what the table was created with
    plain = tablestore.Catalog(str(tmp_path))
    assert plain.get_table("db.a").options["bucket"] == "3"
    assert plain.get_table("db.a").read().num_rows == 60


@pytest.mark.parametrize("options", [{"bucket": "2"}, {"table-storage.nope": "1"}, {"table-storage.bucket": "x"}])
def test_bad_session_options_are_rejected(tmp_path: Path, options: dict[str, str]) -> None:
    with pytest.raises(InvalidOptionError):
        tablestore.Catalog(str(tmp_path), options=options)


def test_rename_table(cat: tablestore.Catalog, tmp_path: Path) -> None:
    rename_case(cat)
    assert not (tmp_path / "db.db" / "old").exists() and not (tmp_path / "db.db" / "new").exists()
