"""`get_format`: the value format of a table by name (`log.format`), with its options parsed once."""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import pyarrow as pa

from logstore.errors import LogFormatError
from logstore.formats.avro import SchemaLookup
from logstore.formats.base import FormatBase, parse_options
from logstore.formats.debezium_avro import DebeziumAvroFormat
from logstore.formats.debezium_json import DebeziumJsonFormat
from logstore.formats.upsert import UpsertFormat

VALUE_FORMATS: dict[str, type[FormatBase]] = {
    "debezium-json": DebeziumJsonFormat,
    "debezium-avro": DebeziumAvroFormat,
    "upsert": UpsertFormat,
}
DEFAULT_FORMAT = "debezium-json"


def get_format(name: str, schema: pa.Schema, primary_key: Sequence[str] = (),
               options: Mapping[str, str] | None = None, *, registry: SchemaLookup | None = None,
               history: Callable[[], Sequence[pa.Schema]] | None = None) -> FormatBase:
    """The value format `name` for a table.

    `options` holds `<name>.<option>` keys (e.g. `debezium-json.schema-include`); keys of other prefixes are
    ignored, unknown keys under the format's prefix are an error. `registry` is where `debezium-avro` registers
    its writer schema and looks up the writer schemas of the records it reads; `history` gives the Arrow schemas
    of every version of the table, for records written before its schema changed.
    """
    cls = VALUE_FORMATS.get(name)
    if cls is None:
        raise LogFormatError(f"unknown log format {name!r}; supported: {sorted(VALUE_FORMATS)}")
    opts = parse_options(name, options or {}, cls.option_keys)
    if cls is DebeziumAvroFormat:
        return DebeziumAvroFormat(schema, primary_key, opts, registry, history)
    return cls(schema, primary_key, opts)
