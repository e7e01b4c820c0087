"""What a change record says about its table's schema, in Arrow types: the columns and primary key a table is
created with (`tablestore ingest --create`), and how a record's schema differs from a table's (schema evolution).

Exact where the record declares types, inferred where it does not:
- `debezium-json` with the Kafka Connect wrapper (`{"schema": ..., "payload": ...}`): the `after` (or `before`)
  field's Connect schema, logical types included (`CONNECT_TYPES`, `LOGICAL_TYPES`); the primary key is the record
  key's fields (its own wrapper's schema, or its payload's names);
- `canal-json`: `mysqlType` (`int(11)`, `decimal(10,2)`, `datetime(3)`...) and `pkNames`;
- `debezium-json` without the wrapper, `upsert-json`, `maxwell-json`: the JSON values (integer → int64, number
  with a fraction → float64, true/false → bool, string → string, object or array → its JSON text as a string);
  the key is the record key's fields (`maxwell-json`: `primary_key_columns`, or the key's `pk.<column>` fields).
Primary-key columns are NOT NULL, every other column nullable. Runs on the driver on a handful of records, never on
the data path (decoding is tablestore/spark/cdc_decode.py, in the JVM).
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from filestore import widens
from tablestore.errors import TableStoreError

FORMATS = ("debezium-json", "upsert-json", "canal-json", "maxwell-json")

JOB_MAX_OFFSETS_PER_TRIGGER = 100_000
"""The records one micro-batch of `tablestore ingest` and `tablestore ingest-database` reads at most, unless told
otherwise (Spark's `maxOffsetsPerTrigger`; the CLI's `--max-offsets-per-trigger`, 0: no cap). Without a cap a job
that fell behind (a restart after downtime, a burst) reads everything in one micro-batch: 400,000 records of four
tables in one batch ran a 1 GB driver out of memory (Spark exit code 52) in issue 50's long run at 10,000 events/s."""


class CdcSchemaError(TableStoreError):
    """A change record's schema cannot be used: no columns, no primary key, or a type that cannot change into the
    table's. Names the table, column and both types where it can."""


CONNECT_TYPES: dict[str, pa.DataType] = {
    "int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
    "float32": pa.float32(), "float": pa.float32(), "float64": pa.float64(), "double": pa.float64(),
    "boolean": pa.bool_(), "string": pa.string(), "bytes": pa.binary(),
}
"""Kafka Connect's primitive types (Debezium's `schema.fields[].type`)."""

TIMESTAMP = pa.timestamp("us")
LOGICAL_TYPES: dict[str, pa.DataType] = {
    "io.debezium.time.Date": pa.date32(), "org.apache.kafka.connect.data.Date": pa.date32(),
    "io.debezium.time.Timestamp": TIMESTAMP, "io.debezium.time.MicroTimestamp": TIMESTAMP,
    "io.debezium.time.NanoTimestamp": TIMESTAMP, "org.apache.kafka.connect.data.Timestamp": TIMESTAMP,
    "io.debezium.time.ZonedTimestamp": pa.timestamp("us", tz="UTC"),
    "io.debezium.time.Time": pa.int64(), "io.debezium.time.MicroTime": pa.int64(),
    "io.debezium.time.NanoTime": pa.int64(), "org.apache.kafka.connect.data.Time": pa.int64(),
    "io.debezium.time.ZonedTime": pa.string(), "io.debezium.time.MicroDuration": pa.int64(),
    "io.debezium.time.Interval": pa.string(),
    "io.debezium.data.Json": pa.string(), "io.debezium.data.Enum": pa.string(), "io.debezium.data.Uuid": pa.string(),
    "io.debezium.data.EnumSet": pa.string(), "io.debezium.data.Xml": pa.string(), "io.debezium.data.Bits": pa.binary(),
    "io.debezium.data.VariableScaleDecimal": pa.string(),
}
"""Debezium's semantic types (`schema.fields[].name`) whose column type differs from the Connect type. A time of
day is an int64 of microseconds since midnight, whatever unit Debezium sends it in (`TIME_UNITS`: the decoder
converts); an interval (`MicroDuration`) an int64 of microseconds, as Debezium computes it (a month is 30.4375
days); a `numeric` without a scale (`VariableScaleDecimal`: an unscaled value and a scale per value, wider than any
fixed decimal) its exact decimal text, as PostgreSQL prints it."""
DECIMAL = "org.apache.kafka.connect.data.Decimal"
VARIABLE_SCALE_DECIMAL = "io.debezium.data.VariableScaleDecimal"
TIMESTAMP_UNITS = {"io.debezium.time.Timestamp": "ms", "org.apache.kafka.connect.data.Timestamp": "ms",
                   "io.debezium.time.MicroTimestamp": "us", "io.debezium.time.NanoTimestamp": "ns"}
TIME_UNITS = {"io.debezium.time.Time": "ms", "org.apache.kafka.connect.data.Time": "ms",
              "io.debezium.time.MicroTime": "us", "io.debezium.time.NanoTime": "ns"}


Signature = tuple[tuple[str | None, str | None, str | None, bool, str | None], ...]
"""A Debezium record's row schema as the decoder compares it: (field, type, name, has parameters, parameters.scale)
per column."""


def debezium_signature(value: bytes | str | None) -> Signature | None:
    """The signature of a Debezium record with the Connect wrapper (None without one): its first `before`/`after`
    struct's fields, as tablestore/spark/cdc_formats.py reads them in Spark."""
    v = _json(value)
    if not isinstance(v, dict) or not isinstance(v.get("schema"), dict) or "payload" not in v:
        return None
    for f in v["schema"].get("fields") or []:
        if isinstance(f, dict) and f.get("field") in ("after", "before") and isinstance(f.get("fields"), list):
            return tuple((c.get("field"), c.get("type"), c.get("name"), isinstance(c.get("parameters"), dict),
                          _text((c.get("parameters") or {}).get("scale"))) for c in f["fields"] if isinstance(c, dict))
    return None


PAYLOAD_MARK = ',"payload":'
"""What follows a Kafka Connect JSON record's schema: `{"schema":{...},"payload":{...}}`."""


@dataclass(frozen=True)
class KnownSchema:
    """A Debezium record schema a table takes as it is: its signature and (when the record starts with its schema,
    as Kafka Connect's JsonConverter writes it) its text up to `,"payload":`, which records of the same schema
    repeat byte for byte."""

    signature: Signature
    head: str | None


def known_schema(value: bytes | str | None) -> KnownSchema | None:
    """The KnownSchema of a Debezium record with the Connect wrapper; None without one."""
    signature = debezium_signature(value)
    if signature is None or value is None:
        return None
    text = value.decode() if isinstance(value, bytes) else value
    head = text.split(PAYLOAD_MARK, 1)[0] if text.startswith('{"schema":') and PAYLOAD_MARK in text else None
    return KnownSchema(signature, head)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class RecordSchema:
    """The columns one change record carries (in its order) and its primary key (empty: the record names none)."""

    fields: tuple[pa.Field, ...]
    primary_key: tuple[str, ...]
    declared: bool
    """True when the record declares its types (Debezium's wrapper, canal's mysqlType); False when inferred."""

    def arrow_schema(self) -> pa.Schema:
        key = set(self.primary_key)
        return pa.schema([f.with_nullable(f.name not in key) for f in self.fields])


def _json(data: bytes | str | None) -> Any:
    if data is None:
        return None
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None


def connect_field_type(field: dict[str, Any]) -> pa.DataType:
    """The Arrow type of one Connect field schema (`{"type": "int32", "name": ..., "parameters": ...}`)."""
    name, kind = field.get("name"), field.get("type")
    if name == DECIMAL:
        params = field.get("parameters") or {}
        scale = int(params.get("scale", 0))
        precision = int(params.get("connect.decimal.precision", 38))
        return pa.decimal128(max(precision, scale, 1), scale)
    if name in LOGICAL_TYPES:
        return LOGICAL_TYPES[name]
    if kind == "array" and isinstance(field.get("items"), dict):
        return pa.list_(connect_field_type(field["items"]))
    if kind in CONNECT_TYPES:
        return CONNECT_TYPES[str(kind)]
    return pa.string()   # structs and maps (and anything new) keep their JSON text


def infer_value_type(value: Any) -> pa.DataType:
    """The column type a JSON value suggests when nothing declares one."""
    if isinstance(value, bool):
        return pa.bool_()
    if isinstance(value, int):
        return pa.int64()
    if isinstance(value, float):
        return pa.float64()
    return pa.string()


def _inferred(row: dict[str, Any]) -> list[pa.Field]:
    return [pa.field(k, infer_value_type(v)) for k, v in row.items()]


_MYSQL = [
    (re.compile(r"^(tinyint\(1\)|bool|boolean)"), lambda m: pa.bool_()),
    (re.compile(r"^tinyint"), lambda m: pa.int16()), (re.compile(r"^(smallint|year)"), lambda m: pa.int32()),
    (re.compile(r"^(mediumint|int|integer)\b.*unsigned"), lambda m: pa.int64()),
    (re.compile(r"^(mediumint|int|integer)"), lambda m: pa.int32()),
    (re.compile(r"^bigint.*unsigned"), lambda m: pa.decimal128(20, 0)), (re.compile(r"^bigint"), lambda m: pa.int64()),
    (re.compile(r"^float"), lambda m: pa.float32()), (re.compile(r"^(double|real)"), lambda m: pa.float64()),
    (re.compile(r"^(decimal|numeric)\((\d+),\s*(\d+)\)"),
     lambda m: pa.decimal128(min(int(m.group(2)), 38), int(m.group(3)))),
    (re.compile(r"^(decimal|numeric)\((\d+)\)"), lambda m: pa.decimal128(min(int(m.group(2)), 38), 0)),
    (re.compile(r"^(decimal|numeric)"), lambda m: pa.decimal128(10, 0)),
    (re.compile(r"^date$"), lambda m: pa.date32()), (re.compile(r"^(datetime|timestamp)"), lambda m: TIMESTAMP),
]


def mysql_type(text: str) -> pa.DataType:
    """The Arrow type of a MySQL column type as canal writes it (`mysqlType`); text for the rest."""
    t = text.strip().lower()
    for pattern, make in _MYSQL:
        m = pattern.match(t)
        if m:
            return make(m)
    return pa.string()


def _key_fields(key: Any) -> tuple[str, ...]:
    """The field names of a record key: a Connect-wrapped key's schema, else a JSON object's names."""
    if isinstance(key, dict) and isinstance(key.get("schema"), dict) and "payload" in key:
        fields = key["schema"].get("fields") or []
        return tuple(f["field"] for f in fields if isinstance(f, dict) and "field" in f)
    if isinstance(key, dict):
        return tuple(key)
    return ()


def _debezium(key: Any, value: dict[str, Any]) -> RecordSchema:
    if isinstance(value.get("schema"), dict) and "payload" in value:
        for part in ("after", "before"):
            for f in value["schema"].get("fields") or []:
                if isinstance(f, dict) and f.get("field") == part and isinstance(f.get("fields"), list):
                    fields = tuple(pa.field(c["field"], connect_field_type(c)) for c in f["fields"])
                    return RecordSchema(fields, _key_fields(key), declared=True)
        raise CdcSchemaError("a Debezium record's schema declares no 'after' or 'before' struct")
    row = value.get("after") or value.get("before")
    if not isinstance(row, dict):
        raise CdcSchemaError("a Debezium record without 'after' or 'before' row (a tombstone?) names no columns")
    return RecordSchema(tuple(_inferred(row)), _key_fields(key), declared=False)


def _canal(value: dict[str, Any]) -> RecordSchema:
    rows = value.get("data") or []
    types = value.get("mysqlType") or {}
    names = list(rows[0]) if rows and isinstance(rows[0], dict) else list(types)
    if not names:
        raise CdcSchemaError("a canal-json record with no 'data' row and no 'mysqlType' names no columns")
    fields = tuple(pa.field(n, mysql_type(types[n]) if n in types else pa.string()) for n in names)
    return RecordSchema(fields, tuple(value.get("pkNames") or ()), declared=bool(types))


def _maxwell(key: Any, value: dict[str, Any]) -> RecordSchema:
    row = value.get("data")
    if not isinstance(row, dict):
        raise CdcSchemaError("a maxwell-json record without a 'data' row names no columns")
    pk = value.get("primary_key_columns")
    if not pk and isinstance(key, dict):
        pk = [k[len("pk."):] for k in key if k.startswith("pk.")]
    return RecordSchema(tuple(_inferred(row)), tuple(pk or ()), declared=False)


def record_schema(format: str, key: bytes | str | None, value: bytes | str | None) -> RecordSchema:
    """The schema one record (Kafka key and value, as on the wire) carries in `format`."""
    k, v = _json(key), _json(value)
    if format == "upsert-json":
        if not isinstance(v, dict):
            raise CdcSchemaError("an upsert-json tombstone (null value) names no columns")
        names = _key_fields(k)
        fields = _inferred({**({n: k[n] for n in names} if isinstance(k, dict) else {}), **v})
        return RecordSchema(tuple(fields), names, declared=False)
    if not isinstance(v, dict):
        raise CdcSchemaError(f"a {format} record value that is not a JSON object names no columns")
    if format == "debezium-json":
        return _debezium(k, v)
    if format == "canal-json":
        return _canal(v)
    if format == "maxwell-json":
        return _maxwell(k, v)
    raise CdcSchemaError(f"unknown CDC format {format!r}: use one of {', '.join(FORMATS)}")


# -- source tables -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceTable:
    """The source table a change record names: canal's and Maxwell's `database` and `table`; Debezium's `source.db`,
    `source.schema` (PostgreSQL, SQL Server) and `source.table`. (upsert-json names none: its topic is its table.)

    A name (`tablestore ingest --source-table`) is `table`, `database.table` (or `schema.table`) or
    `database.schema.table`, matched exactly (`matches`); tablestore/spark/cdc_formats.py writes the same rule in
    Spark SQL for the decoder."""

    database: str | None
    schema: str | None
    table: str

    @property
    def name(self) -> str:
        """`database.table`: how canal and Maxwell name it (and `--source-table` takes it)."""
        return self.table if self.database is None else f"{self.database}.{self.table}"

    def matches(self, name: str) -> bool:
        """Whether `name` names this table: `table`; `q.table` where q is its database or its schema;
        `database.schema.table`."""
        parts = source_table_parts(name)
        if len(parts) == 1:
            return self.table == parts[0]
        if len(parts) == 2:
            return self.table == parts[1] and parts[0] in (self.database, self.schema)
        return (self.database, self.schema, self.table) == parts


def source_table_parts(name: str) -> tuple[str, ...]:
    """`name` (`table`, `database.table`, `database.schema.table`) split into its parts; CdcSchemaError otherwise."""
    parts = tuple(name.split("."))
    if not 1 <= len(parts) <= 3 or not all(parts):
        raise CdcSchemaError(f"source table {name!r}: give table, database.table (or schema.table) or "
                             f"database.schema.table")
    return parts


def record_source(format: str, value: bytes | str | None) -> SourceTable | None:
    """The source table the record (its Kafka value, as on the wire) names; None when it names none (a tombstone,
    upsert-json, a record that is not JSON)."""
    v = _json(value)
    if not isinstance(v, dict):
        return None
    if format == "debezium-json":
        payload = v["payload"] if isinstance(v.get("payload"), dict) else v
        source = payload.get("source")
        v = source if isinstance(source, dict) else {}
        database, schema = v.get("db"), v.get("schema")
    elif format in ("canal-json", "maxwell-json"):
        database, schema = v.get("database"), None
    else:
        return None
    table = v.get("table")
    if not isinstance(table, str):
        return None
    return SourceTable(database if isinstance(database, str) else None, schema if isinstance(schema, str) else None,
                       table)


# -- evolution ---------------------------------------------------------------------------------------------------


def fits(source: pa.DataType, column: pa.DataType) -> bool:
    """True when values of a `source` type are written into a `column` of a table as they are: the same type, a
    narrower one, or a value a string column keeps as text. (Inferred int64 fits any integer column and inferred
    float64 any float or decimal column: the decoder checks each value.)"""
    if source.equals(column) or widens(source, column):
        return True
    if pa.types.is_string(column) or pa.types.is_large_string(column):
        return True
    if pa.types.is_timestamp(source) and pa.types.is_timestamp(column):
        return True
    return False


@dataclass(frozen=True)
class Evolution:
    """What a table must change to take a record: nullable columns to add at the end, columns to widen."""

    add_columns: tuple[pa.Field, ...] = ()
    widen: tuple[tuple[str, pa.DataType], ...] = ()

    def __bool__(self) -> bool:
        return bool(self.add_columns or self.widen)

    def describe(self) -> str:
        parts = [f"add column {f.name} {f.type}" for f in self.add_columns]
        parts += [f"widen column {name} to {t}" for name, t in self.widen]
        return ", ".join(parts) or "nothing"


def evolution(table: str, schema: pa.Schema, record: RecordSchema, primary_key: tuple[str, ...] = ()) -> Evolution:
    """How `schema` (the table's) must change to take `record`'s columns; CdcSchemaError naming the column and both
    types when a column's type changes in a way no table can follow (only declared types can widen: an inferred
    int64 into an int32 column is checked value by value when decoded). A column the record lacks (dropped in the
    source) needs no change: it is written as null."""
    add, widen = [], []
    for f in record.fields:
        if f.name not in schema.names:
            add.append(pa.field(f.name, f.type, nullable=True))
            continue
        column = schema.field(f.name).type
        if not record.declared or fits(f.type, column):
            continue
        if widens(column, f.type) and f.name not in primary_key:
            widen.append((f.name, f.type))
            continue
        why = " (a primary-key column's type cannot change)" if f.name in primary_key else ""
        raise CdcSchemaError(f"table {table!r}: column {f.name!r} changed type in the source from {column} to "
                             f"{f.type}, which the table cannot follow{why}")
    return Evolution(tuple(add), tuple(widen))
