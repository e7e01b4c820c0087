"""debezium-avro: single-object framing, schemas derived from Arrow, and resolution through the registry."""
from __future__ import annotations

import datetime as dt
import decimal
import io
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from logstore.changes import RowKind
from logstore.errors import LogFormatError
from logstore.formats import AvroSchemaRegistry, envelope_schema, fingerprint, get_format

V1 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
V2 = V1.append(pa.field("score", pa.decimal128(9, 2)))


def test_crc64_avro_fingerprint_matches_the_spec_value() -> None:
    # Avro's Java SchemaNormalization.parsingFingerprint64("null") = 0x63dd24e7cc258f8a, stored little-endian
    assert fingerprint('"null"') == (0x63DD24E7CC258F8A).to_bytes(8, "little")


def test_record_is_single_object_encoded_and_readable_by_plain_avro() -> None:
    fmt = get_format("debezium-avro", V2, ["id"])
    value = fmt.encode(RowKind.INSERT, {"id": 7, "name": "x", "score": decimal.Decimal("1.25")})
    assert value is not None and value[:2] == b"\xc3\x01"
    assert value[2:10] == fingerprint(envelope_schema(V2, "tablestore"))
    schema = fastavro.parse_schema(envelope_schema(V2, "tablestore"), named_schemas={})
    env: Any = fastavro.schemaless_reader(io.BytesIO(value[10:]), schema, None)
    assert env["op"] == "c" and env["before"] is None
    assert env["after"] == {"id": 7, "name": "x", "score": decimal.Decimal("1.25")}


def test_old_records_resolve_against_the_new_schema_via_the_registry() -> None:
    registry = AvroSchemaRegistry()
    old = get_format("debezium-avro", V1, ["id"], registry=registry)
    value = old.encode(RowKind.DELETE, {"id": 1, "name": "a"})
    stored = registry.to_dict()  # what the table's metadata keeps
    reloaded = AvroSchemaRegistry.from_dict(stored)
    new = get_format("debezium-avro", V2, ["id"], registry=reloaded)
    assert new.decode(value) == [(RowKind.DELETE, {"id": 1, "name": "a", "score": None})]
    assert len(reloaded.to_dict()) == 2  # the new writer schema joined the old one
    unknown = get_format("debezium-avro", V2, ["id"], registry=AvroSchemaRegistry())
    with pytest.raises(LogFormatError, match="not in the registry"):
        unknown.decode(value)


def test_avro_schema_types() -> None:
    schema = pa.schema([
        pa.field("b", pa.bool_(), nullable=False), ("i", pa.int16()), ("u", pa.uint32()), ("f", pa.float32()),
        ("d", pa.date32()), ("t", pa.timestamp("us", "UTC")), ("lt", pa.timestamp("ms")), ("bin", pa.binary()),
    ])
    fields = {f["name"]: f["type"] for f in envelope_schema(schema, "ns")["fields"][0]["type"][1]["fields"]}
    assert fields["b"] == "boolean"
    assert fields["i"] == ["null", "int"] and fields["u"] == ["null", "long"] and fields["f"] == ["null", "float"]
    assert fields["d"] == ["null", {"type": "int", "logicalType": "date"}]
    assert fields["t"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert fields["lt"] == ["null", {"type": "long", "logicalType": "local-timestamp-millis"}]
    fmt = get_format("debezium-avro", schema, [])
    row = {"b": True, "i": -3, "u": 2**32 - 1, "f": 0.5, "d": dt.date(2000, 2, 29),
           "t": dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.timezone.utc),
           "lt": dt.datetime(1969, 12, 31, 23, 59, 59, 999000), "bin": b"\x00"}
    [(kind, got)] = fmt.decode(fmt.encode(RowKind.UPDATE_AFTER, row))
    assert kind is RowKind.INSERT and got == row
