"""Log formats: pure codecs between changes ((RowKind, row) pairs / Arrow batches) and Kafka record bytes."""
from __future__ import annotations

from logstore.formats.avro import AvroSchemaRegistry, SchemaLookup, envelope_schema, fingerprint
from logstore.formats.base import DecodedBatch, EncodedBatch, FormatOptions, KeyFormat, LogFormat, MessageRef
from logstore.formats.factory import DEFAULT_FORMAT, VALUE_FORMATS, get_format
from logstore.formats.jsonkey import JsonKeyFormat, get_key_format

__all__ = [
    "AvroSchemaRegistry", "DEFAULT_FORMAT", "DecodedBatch", "EncodedBatch", "FormatOptions", "JsonKeyFormat",
    "KeyFormat", "LogFormat", "MessageRef", "SchemaLookup", "VALUE_FORMATS", "envelope_schema", "fingerprint",
    "get_format", "get_key_format",
]
