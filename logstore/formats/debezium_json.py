"""Value format `debezium-json` (the default): the Debezium change-event envelope as JSON.

Written (one record per change, as Flink's debezium-json writes it):
    +I / +U  ->  {"before":null,"after":{row},"op":"c","ts_ms":T[,"source":{...}]}
    -U / -D  ->  {"before":{row},"after":null,"op":"d","ts_ms":T[,"source":{...}]}
so a -U/+U pair reads back as -D/+I (the same rows; Debezium has no single-sided update event).
`schema-include=true` wraps it as `{"schema": <Kafka Connect schema>, "payload": <envelope>}`.

Read (Flink's DebeziumJsonDeserializationSchema semantics, wrapper auto-detected):
    op c / r -> +I(after);  u -> -U(before), +U(after);  d -> -D(before);  null or empty value -> nothing.
An update or delete whose `before` is null, an unknown op, or a value that is not an envelope is a bad
message: skipped and counted with `ignore-parse-errors=true`, otherwise a LogFormatError naming the
topic, partition and offset. The record key is not used.
"""
from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logstore.changes import RowKind, addition_mask
from logstore.formats.base import BadMessage, EncodedBatch, FormatBase, FormatOptions, Row
from logstore.formats.jsonkey import has_decimals, loads, unwrap
from logstore.formats.jsonvalues import json_objects, to_bytes_list

_NULL_BEFORE = ('The "before" field of {} message is null, if you are using Debezium Postgres Connector, please '
                "check the Postgres table has been set REPLICA IDENTITY to FULL level.")


def connect_type(dtype: pa.DataType) -> dict[str, Any]:
    """Kafka Connect schema of a column as this format writes it (temporal values as strings)."""
    t = pa.types
    if t.is_boolean(dtype):
        return {"type": "boolean"}
    if t.is_integer(dtype):
        width = dtype.bit_width * (2 if t.is_unsigned_integer(dtype) else 1)
        return {"type": f"int{min(max(width, 8), 64)}"}
    if t.is_float32(dtype):
        return {"type": "float"}
    if t.is_float64(dtype):
        return {"type": "double"}
    if t.is_decimal(dtype):
        return {"type": "double", "parameters": {"scale": str(dtype.scale), "precision": str(dtype.precision)}}
    if t.is_binary(dtype) or t.is_large_binary(dtype):
        return {"type": "bytes"}
    if pa.types.is_list(dtype):
        return {"type": "array", "items": {**connect_type(dtype.value_type), "optional": dtype.value_field.nullable}}
    return {"type": "string"}


class DebeziumJsonFormat(FormatBase):
    name = "debezium-json"
    option_keys = frozenset({"schema-include", "ignore-parse-errors", "timestamp-format.standard", "namespace",
                             "source"})

    def __init__(self, schema: pa.Schema, primary_key: Sequence[str], options: FormatOptions) -> None:
        super().__init__(schema, primary_key, options)
        self._exact = has_decimals(schema)
        self._source = json.dumps(dict(options.source), separators=(",", ":")) if options.source else None
        self._schema_json = json.dumps(self._connect_schema(), separators=(",", ":"))

    def _connect_schema(self) -> dict[str, Any]:
        ns = self.options.namespace
        fields = [{**connect_type(f.type), "optional": f.nullable, "field": f.name} for f in self.schema]
        value = {"type": "struct", "fields": fields, "optional": True, "name": f"{ns}.Value"}
        envelope: list[dict[str, Any]] = [
            {**value, "field": "before"}, {**value, "field": "after"},
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ]
        if self._source is not None:
            envelope.append({"type": "map", "keys": {"type": "string", "optional": False},
                             "values": {"type": "string", "optional": True}, "optional": True, "field": "source"})
        return {"type": "struct", "fields": envelope, "optional": False, "name": f"{ns}.Envelope"}

    def _encode_rows(self, data: pa.RecordBatch, kinds: pa.Array) -> EncodedBatch:
        n = data.num_rows
        if n == 0:
            return EncodedBatch(np.arange(0, dtype=np.int64), [])
        row_json = json_objects(list(zip(data.schema.names, data.columns)), self.options.timestamp_standard)
        tail = f',"ts_ms":{time.time_ns() // 1_000_000}'
        if self._source is not None:
            tail += f',"source":{self._source}'
        tail += "}" + ("}" if self.options.schema_include else "")
        head = f'{{"schema":{self._schema_json},"payload":' if self.options.schema_include else ""
        is_add = pa.array(addition_mask(kinds))
        prefix = pc.if_else(is_add, head + '{"before":null,"after":', head + '{"before":')
        suffix = pc.if_else(is_add, ',"op":"c"' + tail, ',"after":null,"op":"d"' + tail)
        text = pc.binary_join_element_wise(prefix, row_json, suffix, "")
        return EncodedBatch(np.arange(n, dtype=np.int64), list(to_bytes_list(text)))

    def _parse(self, value: bytes | None, key: bytes | None) -> list[tuple[RowKind, Row]]:
        if not value:
            return []  # tombstone
        try:
            obj = unwrap(loads(value, self._exact))
        except ValueError as exc:
            raise BadMessage(f"corrupt Debezium JSON message {value[:80]!r}: {exc}") from exc
        if obj is None:
            return []  # {"schema": null, "payload": null}: a tombstone as Connect prints it
        if not isinstance(obj, dict):
            raise BadMessage(f"corrupt Debezium JSON message {value[:80]!r}: not a JSON object")
        return envelope_changes(obj)


def envelope_changes(env: dict[str, Any]) -> list[tuple[RowKind, Row]]:
    """The changes of one Debezium envelope (JSON or Avro-decoded), as Flink maps the ops."""
    op = env.get("op")
    before, after = env.get("before"), env.get("after")
    if op in ("c", "r"):
        return [(RowKind.INSERT, _row(after, "after", op))]
    if op == "u":
        if before is None:
            raise BadMessage(_NULL_BEFORE.format("UPDATE"))
        return [(RowKind.UPDATE_BEFORE, _row(before, "before", op)), (RowKind.UPDATE_AFTER, _row(after, "after", op))]
    if op == "d":
        if before is None:
            raise BadMessage(_NULL_BEFORE.format("DELETE"))
        return [(RowKind.DELETE, _row(before, "before", op))]
    raise BadMessage(f'unknown "op" value {op!r}')


def _row(obj: Any, name: str, op: str) -> Row:
    if not isinstance(obj, dict):
        raise BadMessage(f'the "{name}" field of an op {op!r} message is not an object: {obj!r:.80}')
    return obj
