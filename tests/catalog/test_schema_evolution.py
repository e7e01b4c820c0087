"""`catalog.Catalog.alter_table`: what schema it publishes, what it refuses (SchemaEvolutionError naming the table,
the column and both types), idempotence, and a concurrent schema change."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog import Catalog, CatalogError, InvalidTableError, SchemaEvolutionError
from filestore import TableSchema

SCHEMA = pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    pa.field("v", pa.int8()), pa.field("f", pa.float32()), pa.field("d", pa.decimal128(10, 2)),
                    pa.field("s", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> Catalog:
    c = Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    c.create_table("db.t", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"])
    return c


def schema_files(cat: Catalog) -> list[str]:
    return sorted(p.name for p in (Path(cat.root) / "db.db" / "t" / "schema").iterdir())


def test_one_schema_with_every_change(cat: Catalog) -> None:
    table = cat.alter_table("db.t", add_columns=[pa.field("a", pa.int64()), pa.field("b", pa.string())],
                            alter_column_types={"v": pa.int64(), "f": pa.float64(), "d": pa.decimal128(12, 2)})
    assert table.schema.id == 1 and schema_files(cat) == ["schema-0", "schema-1"]
    assert table.schema.arrow_schema == pa.schema([
        pa.field("id", pa.int32(), nullable=False), pa.field("dt", pa.string(), nullable=False),
        pa.field("v", pa.int64()), pa.field("f", pa.float64()), pa.field("d", pa.decimal128(12, 2)),
        pa.field("s", pa.string()), pa.field("a", pa.int64()), pa.field("b", pa.string())])
    assert table.schema.uuid == cat.get_table("db.t").schema.uuid   # the same table
    assert table.store.schema.id == 1 and table.schema.primary_keys == ("id", "dt")


def test_each_widening_step(cat: Catalog) -> None:
    for step in (pa.int16(), pa.int32(), pa.int64()):
        assert cat.alter_table("db.t", alter_column_types={"v": step}).schema.arrow_schema.field("v").type == step
    assert len(schema_files(cat)) == 4


def test_no_change_publishes_nothing(cat: Catalog) -> None:
    cat.alter_table("db.t", add_columns=[pa.field("a", pa.int64())])
    again = cat.alter_table("db.t", add_columns=[pa.field("a", pa.int64())], alter_column_types={"v": pa.int8()})
    assert again.schema.id == 1 and schema_files(cat) == ["schema-0", "schema-1"]
    assert cat.alter_table("db.t").schema.id == 1


@pytest.mark.parametrize("add, types, words", [
    ([pa.field("a", pa.int64(), nullable=False)], {}, ["'a'", "int64 not null", "must be nullable"]),
    ([pa.field("v", pa.int64())], {}, ["'v'", "int64", "int8", "cannot add column"]),
    ([pa.field("_row_kind", pa.string())], {}, ["'_row_kind'", "reserved"]),
    ([pa.field("_SEQUENCE_NUMBER", pa.int64())], {}, ["'_SEQUENCE_NUMBER'", "reserved"]),
    ([pa.field("a", pa.int64()), pa.field("a", pa.int64())], {}, ["'a'", "added twice"]),
    ([], {"id": pa.int64()}, ["'id'", "int32", "int64", "primary-key", "key codec", "bucket hash"]),
    ([], {"dt": pa.large_string()}, ["'dt'", "string", "large_string", "primary-key"]),
    ([], {"v": pa.string()}, ["'v'", "int8", "string", "only widening"]),
    ([], {"v": pa.uint64()}, ["'v'", "int8", "uint64", "only widening"]),
    ([], {"f": pa.float16()}, ["'f'", "float", "halffloat", "only widening"]),
    ([], {"s": pa.large_string()}, ["'s'", "string", "large_string", "only widening"]),
    ([], {"d": pa.decimal128(12, 3)}, ["'d'", "decimal128(10, 2)", "decimal128(12, 3)"]),
    ([], {"d": pa.decimal128(8, 2)}, ["'d'", "decimal128(10, 2)", "decimal128(8, 2)"]),
    ([], {"nope": pa.int64()}, ["'nope'", "no such column"]),
])
def test_refused(cat: Catalog, add: list[pa.Field], types: dict[str, pa.DataType], words: list[str]) -> None:
    with pytest.raises(SchemaEvolutionError) as caught:
        cat.alter_table("db.t", add_columns=add, alter_column_types=types)
    message = str(caught.value)
    assert "table 'db.t'" in message and all(w in message for w in words), message
    assert isinstance(caught.value, InvalidTableError) and isinstance(caught.value, CatalogError)
    assert caught.value.table == "db.t" and caught.value.column in message
    assert schema_files(cat) == ["schema-0"]   # nothing published


def test_narrowing_back_is_refused(cat: Catalog) -> None:
    cat.alter_table("db.t", alter_column_types={"v": pa.int32()})
    with pytest.raises(SchemaEvolutionError, match="cannot change column 'v' from int32 to int16"):
        cat.alter_table("db.t", alter_column_types={"v": pa.int16()})


def test_table_without_primary_key_keeps_its_bucket_key(tmp_path: Path) -> None:
    cat = Catalog(str(tmp_path / "wh"))
    cat.create_database("db")
    cat.create_table("db.c", pa.schema([("k", pa.string()), ("n", pa.int32())]), options={"bucket": "4"})
    evolved = cat.alter_table("db.c", add_columns=[pa.field("x", pa.int32())]).schema
    assert evolved.bucket_key_columns == ("k", "n") and evolved.key_columns == ("k", "n", "x")
    with pytest.raises(SchemaEvolutionError, match="'n'.*int32 to int64.*bucket-key"):
        cat.alter_table("db.c", alter_column_types={"n": pa.int64()})
    widened = cat.alter_table("db.c", alter_column_types={"x": pa.int64()}).schema
    assert widened.bucket_key_columns == ("k", "n")
    stored = json.loads((tmp_path / "wh" / "db.db" / "c" / "schema" / "schema-2").read_text())
    assert stored["bucketKeys"] == ["k", "n"]


def test_schemas_written_before_load_unchanged(cat: Catalog) -> None:
    path = Path(cat.root) / "db.db" / "t" / "schema" / "schema-0"
    stored = json.loads(path.read_text())
    assert "bucketKeys" not in stored   # the on-disk format only grows the field when it is needed
    loaded = TableSchema.from_json(path.read_text())
    assert loaded.bucket_keys == () and loaded.bucket_key_columns == ("id", "dt")


def test_options_change_keeps_the_evolved_schema(cat: Catalog) -> None:
    cat.alter_table("db.t", add_columns=[pa.field("a", pa.int64())])
    table = cat.alter_table_options("db.t", {"write-only": "true", "ingest.schema-evolution": "fail"})
    assert table.schema.arrow_schema.names[-1] == "a" and table.schema.id == 2
    assert table.options.get(catalog.INGEST_SCHEMA_EVOLUTION) == "fail"
    assert cat.get_table("db.t").options.get(catalog.INGEST_SCHEMA_EVOLUTION) == "fail"


def test_concurrent_changes_all_land(cat: Catalog) -> None:
    """Threads adding different columns at once: each change is published on top of the others (exclusive
    create, retried), none is lost."""
    names = [f"c{i}" for i in range(6)]
    errors: list[BaseException] = []

    def add(name: str) -> None:
        try:
            cat.alter_table("db.t", add_columns=[pa.field(name, pa.int64())])
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=add, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    final = cat.get_table("db.t").schema
    assert sorted(final.arrow_schema.names[len(SCHEMA):]) == names and final.id == len(names)


def test_log_format_must_carry_the_new_column(tmp_path: Path) -> None:
    cat = Catalog(str(tmp_path / "wh"), options={"table-storage.log.system": "kafka",
                                                 "table-storage.log.properties.bootstrap.servers": "127.0.0.1:1"})
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    path = Path(cat.root) / "db.db" / "a" / "schema"
    path.mkdir(parents=True)
    stored = TableSchema(0, schema, ("id",), (), {"log.system": "kafka", "log.format": "debezium-avro",
                                                   "log.topic": "t", "log.properties.bootstrap.servers": "127.0.0.1:1"})
    (path / "schema-0").write_text(stored.to_json())   # no topic needed: the check happens before any Kafka call
    with pytest.raises(SchemaEvolutionError, match="not supported by the log formats: l"):
        cat.alter_table("db.a", add_columns=[pa.field("l", pa.struct([("a", pa.int64())]))])
