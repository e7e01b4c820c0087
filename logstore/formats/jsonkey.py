"""Key format `json` and the JSON parsing shared by the JSON value formats.

On the wire: the key is a JSON object of the primary-key fields in primary-key order, values encoded as in
`jsonvalues`. The same key always gives the same bytes (Kafka compaction and partitioning compare bytes).
Tables without a primary key have no key format (records carry no key). Reading also accepts Kafka
Connect's `{"schema": ..., "payload": {...}}` wrapper, as Debezium writes keys by default.
"""
from __future__ import annotations

import decimal
import json
from collections.abc import Mapping, Sequence
from typing import Any

import orjson
import pyarrow as pa

from logstore.errors import LogFormatError
from logstore.formats.base import FormatOptions, Row, parse_options, select_columns
from logstore.formats.jsonvalues import ColumnError, check_schema, column_from_values, json_objects, to_bytes_list


def loads(data: bytes, exact_decimals: bool) -> Any:
    """Parse JSON; with `exact_decimals`, numbers with a fraction become Decimal (no float rounding).

    Raises ValueError when the bytes are not JSON.
    """
    if exact_decimals:
        return json.loads(data, parse_float=decimal.Decimal)
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)  # integers beyond 64 bits, which orjson refuses


def unwrap(obj: Any) -> Any:
    """The payload of a Kafka Connect `{"schema": ..., "payload": ...}` message, else the object itself."""
    if isinstance(obj, dict) and len(obj) == 2 and "payload" in obj and "schema" in obj:
        schema = obj["schema"]
        if schema is None or isinstance(schema, dict):
            return obj["payload"]
    return obj


def has_decimals(schema: pa.Schema) -> bool:
    return any(pa.types.is_decimal(f.type) for f in schema)


class JsonKeyFormat:
    """Primary-key fields <-> JSON object key bytes."""

    name = "json"

    def __init__(self, schema: pa.Schema, primary_key: Sequence[str], options: FormatOptions | None = None) -> None:
        missing = [k for k in primary_key if k not in schema.names]
        if not primary_key or missing:
            raise LogFormatError(f"key format json needs primary-key columns of the schema; missing {missing or 'all'}")
        self.key_schema = pa.schema([schema.field(k) for k in primary_key])
        check_schema(self.key_schema)
        self.options = options or FormatOptions()
        self._exact = has_decimals(self.key_schema)

    def encode(self, row: Row) -> bytes:
        return self.encode_batch(pa.RecordBatch.from_pylist([{k: row.get(k) for k in self.key_schema.names}],
                                                            schema=self.key_schema))[0]

    def encode_batch(self, batch: pa.RecordBatch) -> list[bytes]:
        data = select_columns(batch, self.key_schema)
        text = json_objects(list(zip(data.schema.names, data.columns)), self.options.timestamp_standard)
        return to_bytes_list(text)

    def decode_raw(self, key: bytes) -> Row:
        """The key fields as parsed JSON values (not yet converted to the column types)."""
        obj = unwrap(loads(key, self._exact))
        if not isinstance(obj, dict):
            raise ValueError(f"key is not a JSON object: {key[:80]!r}")
        return {name: obj.get(name) for name in self.key_schema.names}

    def decode(self, key: bytes) -> Row:
        """The key fields; raises ValueError when the key is not a JSON object of convertible values."""
        obj = self.decode_raw(key)
        row: Row = {}
        for f in self.key_schema:
            try:
                row[f.name] = column_from_values([obj.get(f.name)], f.type)[0].as_py()
            except ColumnError as exc:
                raise ValueError(f"key field {f.name!r}: {exc.reason}") from exc
        return row


def get_key_format(name: str, schema: pa.Schema, primary_key: Sequence[str],
                   options: Mapping[str, str] | None = None) -> JsonKeyFormat | None:
    """The key format for a table: None without a primary key; `json` is the only key format."""
    if not primary_key:
        return None
    if name != "json":
        raise LogFormatError(f"unknown key format {name!r}; supported: json")
    opts = parse_options("json", options or {}, frozenset({"timestamp-format.standard"}))
    return JsonKeyFormat(schema, primary_key, opts)
