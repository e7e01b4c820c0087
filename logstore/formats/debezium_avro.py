"""Value format `debezium-avro`: the Debezium envelope as Avro (fastavro), in Avro single-object encoding.

Same change mapping as `debezium-json` (+I/+U written as op "c" with `after`, -U/-D as op "d" with
`before`; read: c/r -> +I, u -> -U,+U, d -> -D, null value -> nothing). The writer schema is derived from
the table's Arrow schema (see `avro`), registered in the registry passed in, and named by fingerprint in
every record, so a reader resolves old records against the current schema. A record whose fingerprint is
not in the registry, with a bad header or a body that does not decode is a bad message.

Schema evolution: a table that gained columns or widened types has records of several writer schemas in its topic.
`history` (the Arrow schemas of every version of the table, from its metadata) is asked when a fingerprint is not
in the registry: the writer schemas of all versions are registered and the record is resolved by Avro's rules
(a field the writer lacks takes its default, null; int -> long and float -> double promote). A reader loaded
before the table changed reads newer records too: fields it does not know are skipped; a widened value that its
older type cannot hold (long -> int) does not resolve: a bad message.
"""
from __future__ import annotations

import io
import time
from collections.abc import Callable, Sequence
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logstore.changes import IS_ADDITION, RowKind
from logstore.formats.avro import HEADER_LEN, MAGIC, AvroSchemaRegistry, SchemaLookup, envelope_schema
from logstore.formats.base import BadMessage, EncodedBatch, FormatBase, FormatOptions, Row
from logstore.formats.debezium_json import envelope_changes



class DebeziumAvroFormat(FormatBase):
    name = "debezium-avro"
    option_keys = frozenset({"ignore-parse-errors", "namespace", "source"})

    def __init__(self, schema: pa.Schema, primary_key: Sequence[str], options: FormatOptions,
                 registry: SchemaLookup | None = None,
                 history: Callable[[], Sequence[pa.Schema]] | None = None) -> None:
        super().__init__(schema, primary_key, options)
        self._history = history
        self._asked: set[bytes] = set()  # fingerprints the history was asked for (once each)
        self.writer_schema = envelope_schema(schema, options.namespace)
        own = AvroSchemaRegistry()
        self.fingerprint = own.register(self.writer_schema)
        self._parsed = own.lookup(self.fingerprint)
        if registry is None:
            registry = own
        elif isinstance(registry, AvroSchemaRegistry):
            registry.register(self.writer_schema)
        self.registry = registry
        self._own = registry if isinstance(registry, AvroSchemaRegistry) else own
        self._header = MAGIC + self.fingerprint
        self._source = dict(options.source) if options.source else None

    def _encode_rows(self, data: pa.RecordBatch, kinds: pa.Array) -> EncodedBatch:
        columns = {}
        for f, arr in zip(data.schema, data.columns):
            if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
                arr = pc.cast(arr, pa.int64())  # fastavro has no timestamp-nanos: write the integer itself
            columns[f.name] = arr.to_pylist()
        names = list(columns)
        ts_ms = time.time_ns() // 1_000_000
        buf = io.BytesIO()
        values: list[bytes | None] = []
        for i, kind in enumerate(kinds.to_pylist()):
            row = {n: columns[n][i] for n in names}
            add = IS_ADDITION[kind]
            record = {"before": None if add else row, "after": row if add else None, "op": "c" if add else "d",
                      "ts_ms": ts_ms, "source": self._source}
            buf.seek(0)
            buf.truncate()
            buf.write(self._header)
            fastavro.schemaless_writer(buf, self._parsed, record)
            values.append(buf.getvalue())
        return EncodedBatch(np.arange(len(values), dtype=np.int64), values)

    def _parse(self, value: bytes | None, key: bytes | None) -> list[tuple[RowKind, Row]]:
        if not value:
            return []
        if len(value) < HEADER_LEN or value[:2] != MAGIC:
            raise BadMessage(f"not an Avro single-object record (header {value[:HEADER_LEN].hex()})")
        fp = value[2:HEADER_LEN]
        writer = self.registry.lookup(fp)
        if writer is None and self._history is not None and fp not in self._asked:
            self._asked.add(fp)  # a record of another version of the table: register every version's schema
            for version in self._history():
                self._own.register(envelope_schema(version, self.options.namespace))
            writer = self._own.lookup(fp)
        if writer is None:
            raise BadMessage(f"writer schema with fingerprint {fp.hex()} is not in the registry")
        reader = None if fp == self.fingerprint else self._parsed
        try:
            env: Any = fastavro.schemaless_reader(io.BytesIO(value[HEADER_LEN:]), writer, reader)
        except Exception as exc:  # fastavro raises many types on a bad body
            raise BadMessage(f"Avro body does not decode: {type(exc).__name__}: {exc}") from exc
        if not isinstance(env, dict):
            raise BadMessage("Avro record is not an envelope")
        return envelope_changes(env)
