"""The CDC decoder (tablestore/spark/cdc_decode.py) on Kafka-shaped rows: real Debezium samples, each format,
Debezium's type encodings, bad records and schema changes. Decoding is Spark SQL only: these run it in the JVM."""
from __future__ import annotations

import base64
import datetime as dt
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tablestore.spark.cdc_decode import BAD_RECORD, ERROR, SCHEMA_CHANGE, DecodeSpec, changes, decode

pytestmark = pytest.mark.spark

SAMPLES = Path(__file__).resolve().parents[2] / "data" / "debezium"
"""Real Debezium messages (Debezium's and Flink's, Apache-2.0; provenance in its README) and the rows they must give."""
KAFKA_ROW = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
CUSTOMERS = pa.schema([pa.field("id", pa.int32(), False), ("first_name", pa.string()), ("last_name", pa.string()),
                       ("email", pa.string())])
PRODUCTS = pa.schema([pa.field("id", pa.int32(), False), ("name", pa.string()), ("description", pa.string()),
                      ("weight", pa.float64())])


def _raw(spark: Any, values: list[tuple[bytes | str | None, bytes | str | None]]) -> Any:
    def b(x: bytes | str | None) -> bytes | None:
        return x.encode() if isinstance(x, str) else x

    rows = [(b(k), b(v), "src", 0, i, dt.datetime(2024, 1, 1)) for i, (k, v) in enumerate(values)]
    return spark.createDataFrame(rows, KAFKA_ROW)


def _rows(df: Any) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for r in df.collect():
        d = r.asDict()
        out.append((d.pop("_row_kind"), {k: v for k, v in d.items() if not k.startswith("__cdc")}))
    return out


def _spec(schema: pa.Schema, fmt: str = "debezium-json", bad: str = "fail") -> DecodeSpec:
    return DecodeSpec(fmt, "db.t", schema, (schema.names[0],), bad)  # type: ignore[arg-type]


def test_the_real_debezium_samples_decode_to_their_expected_rows(spark: Any) -> None:
    expected = json.loads((SAMPLES / "expected_rows.json").read_text())
    for name, want in sorted(expected.items()):
        if "error" in want:
            continue
        value = None if name.startswith("06_") else (SAMPLES / name).read_bytes()
        key = (SAMPLES / "06_mysql_tombstone_key.json").read_bytes() if name.startswith("06_") else None
        schema = PRODUCTS if name.startswith(("08", "09")) else CUSTOMERS
        got = _rows(changes(_raw(spark, [(key, value)]), _spec(schema)))
        assert got == [(kind, row) for kind, row in want["rows"]], name


def test_an_update_without_a_before_image_is_an_upsert_of_the_after_row(spark: Any) -> None:
    """PostgreSQL without REPLICA IDENTITY FULL: Flink fails; tablestore writes the after row (+U), which the
    primary-key table's merge resolves."""
    value = (SAMPLES / "10_postgres_update_before_null_no_schema.json").read_bytes()
    got = _rows(changes(_raw(spark, [(None, value)]), _spec(PRODUCTS)))
    assert got == [("+U", {"id": 106, "name": "hammer", "description": "18oz carpenter hammer", "weight": 1.0})]


def _decimal_b64(unscaled: int) -> str:
    return base64.b64encode(unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)).decode()


def test_debezium_type_encodings_are_read_from_the_connect_schema(spark: Any) -> None:
    fields = [
        {"field": "id", "type": "int64"},
        {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
         "parameters": {"scale": "3"}},
        {"field": "day", "type": "int32", "name": "io.debezium.time.Date"},
        {"field": "ms", "type": "int64", "name": "io.debezium.time.Timestamp"},
        {"field": "us", "type": "int64", "name": "io.debezium.time.MicroTimestamp"},
        {"field": "ns", "type": "int64", "name": "io.debezium.time.NanoTimestamp"},
        {"field": "zoned", "type": "string", "name": "io.debezium.time.ZonedTimestamp"},
        {"field": "flag", "type": "boolean"},
        {"field": "blob", "type": "bytes"},
    ]
    schema = pa.schema([pa.field("id", pa.int64(), False), ("price", pa.decimal128(12, 3)), ("day", pa.date32()),
                        ("ms", pa.timestamp("us")), ("us", pa.timestamp("us")), ("ns", pa.timestamp("us")),
                        ("zoned", pa.timestamp("us", tz="UTC")), ("flag", pa.bool_()), ("blob", pa.binary())])
    instant = dt.datetime(2024, 2, 29, 13, 14, 15, 123456)
    epoch_us = (instant - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)
    after = {"id": 1, "price": _decimal_b64(-1234567), "day": 19782, "ms": epoch_us // 1000, "us": epoch_us,
             "ns": epoch_us * 1000, "zoned": "2024-02-29T13:14:15.123456+02:00", "flag": True,
             "blob": base64.b64encode(b"\x00\xff").decode()}
    wrapped = {"schema": {"type": "struct", "fields": [{"type": "struct", "field": "after", "fields": fields}]},
               "payload": {"before": None, "after": after, "op": "c", "ts_ms": 1}}
    [(kind, row)] = _rows(changes(_raw(spark, [(None, json.dumps(wrapped))]), _spec(schema)))
    assert kind == "+I"
    assert row["price"] == Decimal("-1234.567")
    assert row["day"] == dt.date(2024, 2, 29)
    assert row["ms"] == instant.replace(microsecond=123000)
    assert row["us"] == instant and row["ns"] == instant
    assert row["zoned"].astimezone(dt.timezone.utc).replace(tzinfo=None) == instant - dt.timedelta(hours=2)
    assert row["flag"] is True and bytes(row["blob"]) == b"\x00\xff"


def test_without_the_wrapper_decimals_from_text_and_timestamps_by_magnitude(spark: Any) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), False), ("price", pa.decimal128(10, 2)),
                        ("at", pa.timestamp("us"))])
    rows = [{"id": 1, "price": "12.30", "at": 1_700_000_000_000}, {"id": 2, "price": _decimal_b64(1230),
                                                                   "at": 1_700_000_000_000_000}]
    values = [(None, json.dumps({"op": "c", "after": r})) for r in rows]
    got = _rows(changes(_raw(spark, values), _spec(schema)))
    at = dt.datetime(2023, 11, 14, 22, 13, 20)
    assert got == [("+I", {"id": 1, "price": Decimal("12.30"), "at": at}),
                   ("+I", {"id": 2, "price": Decimal("12.30"), "at": at})]


def test_upsert_json_a_value_upserts_and_a_tombstone_deletes_the_key(spark: Any) -> None:
    values = [('{"id": 1}', '{"id": 1, "first_name": "a", "email": null}'), ('{"id": 2}', '{"first_name": "b"}'),
              ('{"id": 1}', None)]
    got = _rows(changes(_raw(spark, values), _spec(CUSTOMERS, "upsert-json")))
    assert got == [("+U", {"id": 1, "first_name": "a", "last_name": None, "email": None}),
                   ("+U", {"id": 2, "first_name": "b", "last_name": None, "email": None}),
                   ("-D", {"id": 1, "first_name": None, "last_name": None, "email": None})]


def test_canal_json_as_flink_reads_it(spark: Any) -> None:
    """Rows as text; an UPDATE's `old` holds the changed fields' old values; DDL is skipped."""
    insert = {"data": [{"id": "1", "first_name": "a", "last_name": "x", "email": None},
                       {"id": "2", "first_name": "b", "last_name": "y", "email": None}],
              "type": "INSERT", "es": 1, "ts": 2, "isDdl": False, "pkNames": ["id"]}
    update = {"data": [{"id": "1", "first_name": "A", "last_name": "x", "email": None}],
              "old": [{"first_name": "a"}], "type": "UPDATE", "es": 3, "ts": 4, "isDdl": False}
    delete = {"data": [{"id": "2", "first_name": "b", "last_name": "y", "email": None}], "type": "DELETE",
              "es": 5, "ts": 6, "isDdl": False}
    ddl = {"data": None, "type": "ALTER", "isDdl": True, "sql": "ALTER TABLE t ADD c INT", "es": 7, "ts": 8}
    got = _rows(changes(_raw(spark, [(None, json.dumps(v)) for v in (insert, update, delete, ddl)]),
                        _spec(CUSTOMERS, "canal-json")))
    row = {"last_name": "x", "email": None}
    assert got == [("+I", {"id": 1, "first_name": "a", **row}), ("+I", {"id": 2, "first_name": "b", "last_name": "y",
                                                                       "email": None}),
                   ("-U", {"id": 1, "first_name": "a", **row}), ("+U", {"id": 1, "first_name": "A", **row}),
                   ("-D", {"id": 2, "first_name": "b", "last_name": "y", "email": None})]


def test_maxwell_json_as_flink_reads_it(spark: Any) -> None:
    values = [{"database": "d", "table": "t", "type": "insert", "ts": 1, "data": {"id": 1, "name": "a", "weight": 1.5}},
              {"database": "d", "table": "t", "type": "update", "ts": 2, "data": {"id": 1, "name": "b", "weight": 1.5},
               "old": {"name": "a"}},
              {"database": "d", "table": "t", "type": "delete", "ts": 3, "data": {"id": 1, "name": "b", "weight": 1.5}}]
    schema = pa.schema([pa.field("id", pa.int32(), False), ("name", pa.string()), ("weight", pa.float64())])
    got = _rows(changes(_raw(spark, [(None, json.dumps(v)) for v in values]), _spec(schema, "maxwell-json")))
    assert [k for k, _ in got] == ["+I", "-U", "+U", "-D"]
    assert [r["name"] for _, r in got] == ["a", "a", "b", "b"]


@pytest.mark.parametrize("value, reason", [
    ("not json", "not valid JSON"),
    ('{"before": null, "after": {"id": 2, "na', "not valid JSON"),   # a record cut short
    ('{"before": null, "after": {"id": 2}}', "not a Debezium change event (no 'op')"),
    ('{"op": "x", "after": null, "before": null}', "unsupported op x"),
    ('{"op": "c", "after": null}', "op c without 'after'"),
    ('{"op": "c", "after": {"id": "x1"}}', "column id: cannot read 'x1' as INT"),
    ('{"op": "c", "after": {"first_name": "a"}}', "primary-key column id is null"),
])
def test_a_bad_record_fails_naming_topic_partition_offset_and_reason(spark: Any, value: str, reason: str) -> None:
    raw = _raw(spark, [(None, '{"op": "c", "after": {"id": 1}}'), (None, value)])
    with pytest.raises(Exception) as failure:
        changes(raw, _spec(CUSTOMERS)).collect()
    message = str(failure.value)
    assert BAD_RECORD in message
    assert f"table db.t: bad debezium-json record in topic src partition 0 offset 1: {reason}" in message


def test_skip_drops_and_counts_bad_records(spark: Any) -> None:
    raw = _raw(spark, [(None, "not json"), (None, '{"op": "c", "after": {"id": 1}}'), (None, '{"op": "x"}')])
    decoded = decode(raw, _spec(CUSTOMERS))
    assert decoded.filter(f"{ERROR} IS NOT NULL").count() == 2
    assert [k for k, _ in _rows(changes(raw, _spec(CUSTOMERS, bad="skip")))] == ["+I"]


@pytest.mark.parametrize("value, detail", [
    ('{"op": "c", "after": {"id": 1, "phone": "1"}}', "its columns or their types are not the table's"),
    ('{"op": "c", "after": {"id": 3000000000}}', "column id: cannot read '3000000000' as INT"),
    (json.dumps({"schema": {"fields": [{"field": "after", "fields": [{"field": "id", "type": "int64"}]}]},
                 "payload": {"op": "c", "after": {"id": 1}}}), "its columns or their types are not the table's"),
])
def test_a_schema_change_stops_the_batch_with_its_marker(spark: Any, value: str, detail: str) -> None:
    """A new column, a number too large for its column, a wider declared type: the job (tablestore ingest) evolves
    the table at this record; even `skip` does not drop it."""
    with pytest.raises(Exception) as failure:
        changes(_raw(spark, [(None, value)]), _spec(CUSTOMERS, bad="skip")).collect()
    message = str(failure.value)
    assert f"{SCHEMA_CHANGE}: table db.t: schema change in topic src partition 0 offset 0: {detail}" in message


def test_the_known_schema_fast_path_decodes_as_the_general_path(spark: Any) -> None:
    """Records whose schema text is a known schema's are parsed by their payload alone: same rows; a record of
    another schema in the same stream still takes the general path (and a new column is still a schema change)."""
    from tablestore.cdc import known_schema
    from tablestore.cdc.shop import ShopOrders

    shop = ShopOrders(keys=30, key_change_ratio=0.05)
    events = list(shop.events(120))
    schema = pa.schema([pa.field("order_id", pa.int64(), False), ("customer_id", pa.int32()), ("status", pa.string()),
                        ("amount", pa.decimal128(10, 2)), ("created_at", pa.timestamp("us")),
                        ("updated_at", pa.timestamp("us"))])
    known = known_schema(events[0][1])
    assert known is not None and known.head is not None
    general = DecodeSpec("debezium-json", "db.t", schema, ("order_id",))
    fast = DecodeSpec("debezium-json", "db.t", schema, ("order_id",), known=(known,))
    raw = _raw(spark, events)
    expected = _rows(changes(raw, general))
    assert _rows(changes(raw, fast)) == expected and len(expected) > 120
    routed = DecodeSpec("debezium-json", "db.t", schema, ("order_id",), known=(known,), source_table="shop.orders")
    assert _rows(changes(raw, routed)) == expected   # the fast path reads the source's names too
    other = DecodeSpec("debezium-json", "db.t", schema, ("order_id",), known=(known,), source_table="shop.items")
    assert _rows(changes(raw, other)) == []
    shop.add_coupon()
    with pytest.raises(Exception, match=SCHEMA_CHANGE):
        changes(_raw(spark, events + list(shop.events(5))), fast).collect()


def test_without_before_images_an_update_keeping_its_key_is_its_after_image(spark: Any) -> None:
    """What `tablestore ingest` writes into a primary-key table: the after image of an update that keeps the key
    (the table's merge replaces the row), -U then +U where the key changed."""
    same = {"op": "u", "before": {"id": 1, "first_name": "a"}, "after": {"id": 1, "first_name": "b"}}
    moved = {"op": "u", "before": {"id": 1, "first_name": "b"}, "after": {"id": 2, "first_name": "b"}}
    spec = DecodeSpec("debezium-json", "db.t", CUSTOMERS, ("id",), before_images=False)
    got = _rows(changes(_raw(spark, [(None, json.dumps(same)), (None, json.dumps(moved))]), spec))
    assert [(k, r["id"]) for k, r in got] == [("+U", 1), ("-U", 1), ("+U", 2)]


# -- source tables, canal's INIT, deletes without a replica identity, counts under `skip` -------------------------

A_TABLE = pa.schema([pa.field("id", pa.int32(), False), ("name", pa.string())])


def _canal(database: str, table: str, rows: list[dict[str, Any]], type_: str = "INSERT") -> str:
    return json.dumps({"data": rows, "database": database, "table": table, "type": type_, "es": 1, "ts": 2,
                       "isDdl": False, "pkNames": ["id"]})


def _maxwell(database: str, table: str, row: dict[str, Any], type_: str = "insert") -> str:
    return json.dumps({"database": database, "table": table, "type": type_, "ts": 1, "data": row})


@pytest.mark.parametrize("fmt", ["canal-json", "maxwell-json"])
def test_a_source_table_keeps_its_records_and_another_table_s_give_no_rows(spark: Any, fmt: str) -> None:
    """A topic of two tables: the other's records (other columns, a type the format does not know, a value the
    table's column cannot hold) are never a schema change nor a bad record: they give no rows."""
    make = (lambda db, t, row, **kw: _canal(db, t, [row], **kw)) if fmt == "canal-json" else _maxwell
    unknown = "ODD" if fmt == "canal-json" else "odd"
    values = [make("db", "a", {"id": 1, "name": "x"}), make("db", "b", {"id": 2, "sku": "s", "qty": 3}),
              make("db", "b", {"id": "not a number"}), make("db", "b", {"id": 4}, type_=unknown),
              make("other", "a", {"id": 5, "weight": 1.5}), make("db", "a", {"id": 6, "name": "y"})]
    raw = _raw(spark, [(None, v) for v in values])
    got = _rows(changes(raw, DecodeSpec(fmt, "db.t", A_TABLE, ("id",), "fail", source_table="db.a")))
    assert got == [("+I", {"id": 1, "name": "x"}), ("+I", {"id": 6, "name": "y"})]
    with pytest.raises(Exception, match=SCHEMA_CHANGE):   # `a` of every database: other.a has a column `weight`
        changes(raw, DecodeSpec(fmt, "db.t", A_TABLE, ("id",), source_table="a")).collect()
    errors = decode(raw, DecodeSpec(fmt, "db.t", A_TABLE, ("id",))).filter(f"{ERROR} IS NOT NULL").collect()
    assert [(r["__cdc_offset"], r[ERROR].startswith(SCHEMA_CHANGE)) for r in errors] == [
        (1, True), (2, False), (3, False), (4, True)]   # no source table: b's columns, b's bad records


def test_debezium_source_tables_by_database_schema_and_table_as_the_python_rule_reads_them(spark: Any) -> None:
    """`source.db`, `source.schema` (PostgreSQL) and `source.table`: the decoder's SQL and SourceTable.matches (what
    table creation samples by) agree on every name."""
    from tablestore.cdc.schemas import record_source

    samples = ["07_postgres_create_with_schema.json", "02_mysql_create_no_schema.json",
               "09_postgres_delete_no_schema.json"]
    values = [(SAMPLES / name).read_bytes() for name in samples]
    names = ["customers", "products", "public.customers", "postgres.customers", "inventory.customers",
             "inventory.products", "postgres.public.customers", "postgres.inventory.customers", "orders"]
    raw = _raw(spark, [(None, v) for v in values])
    for name in names:
        schema = PRODUCTS if name.endswith("products") else CUSTOMERS
        spec = DecodeSpec("debezium-json", "db.t", schema, ("id",), "skip", source_table=name)
        offsets = sorted({r["__cdc_offset"] for r in decode(raw, spec).filter(f"{ERROR} IS NULL").collect()})
        expected = [i for i, v in enumerate(values) if (s := record_source("debezium-json", v)) and s.matches(name)]
        assert offsets == expected, name
    assert expected == []   # "orders": none of them
    spec = DecodeSpec("debezium-json", "db.t", CUSTOMERS, ("id",), source_table="public.customers")
    assert [r["first_name"] for _, r in _rows(changes(raw, spec))] == ["Anne"]


def test_canal_init_is_an_insert(spark: Any) -> None:
    """canal's initial load (`INIT`), as flink-cdc reads it."""
    value = _canal("db", "a", [{"id": "1", "name": "x"}, {"id": "2", "name": "y"}], type_="INIT")
    got = _rows(changes(_raw(spark, [(None, value)]), DecodeSpec("canal-json", "db.t", A_TABLE, ("id",))))
    assert got == [("+I", {"id": 1, "name": "x"}), ("+I", {"id": 2, "name": "y"})]


def test_a_debezium_delete_without_any_image_says_to_set_a_replica_identity(spark: Any) -> None:
    value = '{"op": "d", "before": null, "after": null, "source": {"db": "shop", "schema": "public", "table": "t"}}'
    with pytest.raises(Exception) as failure:
        changes(_raw(spark, [(None, value)]), _spec(CUSTOMERS)).collect()
    assert ("bad debezium-json record in topic src partition 0 offset 0: op 'd' without 'before': the source table "
            "has no replica identity (PostgreSQL: ALTER TABLE ... REPLICA IDENTITY FULL") in str(failure.value)


def test_skip_counts_each_bad_record_once_and_rows_are_the_changes_passed_on(spark: Any) -> None:
    """A canal record of 3 unreadable rows and a Debezium update whose images both are unreadable are 1 bad record
    each (not 3 and 2); `rows` counts the changes written, not the bad ones."""
    from pyspark.sql import Observation

    canal = [(None, _canal("db", "a", [{"id": "x"}, {"id": "y"}, {"id": "z"}])),
             (None, _canal("db", "a", [{"id": "1", "name": "a"}, {"id": "2", "name": "b"}])),
             (None, "not json")]
    observation = Observation("canal")
    got = _rows(changes(_raw(spark, canal), DecodeSpec("canal-json", "db.t", A_TABLE, ("id",), "skip"), observation))
    assert len(got) == 2 and observation.get["rows"] == 2 and observation.get["bad"] == 2

    update = {"op": "u", "before": {"id": "x"}, "after": {"id": "y"}}
    debezium = [(None, json.dumps(update)), (None, '{"op": "c", "after": {"id": 1}}')]
    observation = Observation("debezium")
    got = _rows(changes(_raw(spark, debezium), _spec(CUSTOMERS, bad="skip"), observation))
    assert got == [("+I", {"id": 1, "first_name": None, "last_name": None, "email": None})]
    assert observation.get["rows"] == 1 and observation.get["bad"] == 1


def test_upsert_json_names_no_source_table(spark: Any) -> None:
    spec = DecodeSpec("upsert-json", "db.t", CUSTOMERS, ("id",), source_table="db.t")
    with pytest.raises(ValueError, match="upsert-json records name no source table"):
        decode(_raw(spark, [('{"id": 1}', '{"id": 1}')]), spec)
