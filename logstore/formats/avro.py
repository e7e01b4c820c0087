"""Avro schemas derived from Arrow schemas, Avro single-object framing, and the schema registry it reads with.

On the wire (Avro spec, "Single object encoding"): ``0xC3 0x01``, then the 8-byte little-endian
CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form, then the Avro binary body. A reader
looks the fingerprint up in a registry (the table's metadata keeps every writer schema it ever used, as
``to_dict()`` gives them) and resolves the writer schema against its own, so evolution needs no guessing.

Arrow -> Avro types (nullable columns become ``["null", T]`` with default null):
    bool -> boolean; int8/16/32, uint8/16 -> int; int64, uint32 -> long; float32 -> float; float64 -> double;
    decimal(p, s) -> bytes/decimal(p, s); string -> string; binary -> bytes; date32 -> int/date;
    timestamp s|ms -> long/timestamp-millis, us -> long/timestamp-micros, ns -> long/timestamp-nanos
    (``local-`` variants for timestamps without time zone); list<T> -> array of (nullable) T.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

import fastavro
import pyarrow as pa
from fastavro.schema import fingerprint as _fastavro_fingerprint
from fastavro.schema import to_parsing_canonical_form

from logstore.errors import LogFormatError

MAGIC = b"\xc3\x01"
HEADER_LEN = 10
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def avro_type(dtype: pa.DataType) -> Any:
    """The Avro type of a (non-null) Arrow column type."""
    t = pa.types
    if t.is_boolean(dtype):
        return "boolean"
    if t.is_integer(dtype):
        small = dtype.bit_width < 32 or (t.is_signed_integer(dtype) and dtype.bit_width == 32)
        if t.is_unsigned_integer(dtype) and dtype.bit_width > 32:
            raise LogFormatError(f"Avro has no type for {dtype}")
        return "int" if small else "long"
    if t.is_float32(dtype):
        return "float"
    if t.is_float64(dtype):
        return "double"
    if t.is_decimal(dtype):
        return {"type": "bytes", "logicalType": "decimal", "precision": dtype.precision, "scale": dtype.scale}
    if t.is_string(dtype) or t.is_large_string(dtype):
        return "string"
    if t.is_binary(dtype) or t.is_large_binary(dtype):
        return "bytes"
    if t.is_date32(dtype):
        return {"type": "int", "logicalType": "date"}
    if t.is_timestamp(dtype):
        unit = {"s": "millis", "ms": "millis", "us": "micros", "ns": "nanos"}[dtype.unit]
        local = "" if dtype.tz is not None else "local-"
        return {"type": "long", "logicalType": f"{local}timestamp-{unit}"}
    if t.is_list(dtype):
        item = avro_type(dtype.value_type)
        return {"type": "array", "items": ["null", item] if dtype.value_field.nullable else item}
    raise LogFormatError(f"Avro has no type for {dtype}")


def value_record(schema: pa.Schema, namespace: str) -> dict[str, Any]:
    """The Avro record of a table row."""
    fields = []
    for f in schema:
        if not _NAME.match(f.name):
            raise LogFormatError(f"column name {f.name!r} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*)")
        typ = avro_type(f.type)
        fields.append({"name": f.name, "type": ["null", typ], "default": None} if f.nullable
                      else {"name": f.name, "type": typ})
    return {"type": "record", "name": "Value", "namespace": namespace, "fields": fields}


def envelope_schema(schema: pa.Schema, namespace: str) -> dict[str, Any]:
    """The Debezium envelope as an Avro record (`before`/`after` of the row record, `op`, `ts_ms`, `source`)."""
    value = value_record(schema, namespace)
    return {
        "type": "record", "name": "Envelope", "namespace": namespace,
        "fields": [
            {"name": "before", "type": ["null", value], "default": None},
            {"name": "after", "type": ["null", f"{namespace}.Value"], "default": None},
            {"name": "op", "type": "string"},
            {"name": "ts_ms", "type": ["null", "long"], "default": None},
            {"name": "source", "type": ["null", {"type": "map", "values": "string"}], "default": None},
        ],
    }


def canonical_form(schema: Mapping[str, Any] | str) -> str:
    """The Parsing Canonical Form of a schema (JSON text or object)."""
    obj = json.loads(schema) if isinstance(schema, str) else dict(schema)
    return str(to_parsing_canonical_form(fastavro.parse_schema(obj, named_schemas={})))


def fingerprint(schema: Mapping[str, Any] | str) -> bytes:
    """The 8-byte CRC-64-AVRO fingerprint as single-object encoding writes it (little-endian)."""
    return bytes.fromhex(_fastavro_fingerprint(canonical_form(schema), "CRC-64-AVRO"))


class SchemaLookup(Protocol):
    """What a reader needs: the writer schema of a fingerprint, or None."""

    def lookup(self, fingerprint: bytes) -> Any: ...


class AvroSchemaRegistry:
    """Writer schemas by fingerprint, in memory; `to_dict`/`from_dict` store them in the table's metadata."""

    def __init__(self, schemas: Mapping[str, str] | None = None) -> None:
        self._text: dict[bytes, str] = {}
        self._parsed: dict[bytes, Any] = {}
        for text in (schemas or {}).values():
            self.register(text)

    def register(self, schema: Mapping[str, Any] | str) -> bytes:
        """Add a schema (idempotent); return its fingerprint. The full schema is kept (logical types
        included): the canonical form, which the fingerprint is taken of, drops them."""
        obj = json.loads(schema) if isinstance(schema, str) else dict(schema)
        fp = fingerprint(obj)
        if fp not in self._text:
            self._text[fp] = json.dumps(obj, sort_keys=True, separators=(",", ":"))
            self._parsed[fp] = fastavro.parse_schema(obj, named_schemas={})
        return fp

    def lookup(self, fingerprint: bytes) -> Any:
        return self._parsed.get(fingerprint)

    def to_dict(self) -> dict[str, str]:
        """Fingerprint (hex) -> schema JSON, for the table's metadata."""
        return {fp.hex(): text for fp, text in self._text.items()}

    @classmethod
    def from_dict(cls, schemas: Mapping[str, str]) -> AvroSchemaRegistry:
        return cls(schemas)
