"""Value format `upsert`: the full row as a JSON object, a tombstone for deletes (upsert-kafka semantics).

Written:  +I / +U -> the row as a JSON object (all columns, encoded as in `jsonvalues`);
          -D      -> a tombstone (None value; the record key carries the primary key);
          -U      -> no record (`writes(-U)` is False; `encode_batch` drops those rows).
Read:     a JSON object -> +U(row): an *upsert stream*. The reader cannot tell an insert from an update
          without state, so every value is read as UPDATE_AFTER; a normalize step keyed on the primary key
          turns the stream into +I / -U / +U / -D (FLIP-188 `log.changelog-mode=upsert`).
          a tombstone   -> -D with the key fields set from the record key and every other column null.
Needs a primary key. A tombstone without key, a key or value that is not a JSON object, or a value that
does not fit the schema is a bad message (skipped and counted with `ignore-parse-errors=true`).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logstore.changes import RowKind
from logstore.errors import LogFormatError
from logstore.formats.base import BadMessage, EncodedBatch, FormatBase, FormatOptions, Row
from logstore.formats.jsonkey import JsonKeyFormat, has_decimals, loads, unwrap
from logstore.formats.jsonvalues import json_objects, to_bytes_list


class UpsertFormat(FormatBase):
    name = "upsert"
    option_keys = frozenset({"ignore-parse-errors", "timestamp-format.standard"})

    def __init__(self, schema: pa.Schema, primary_key: Sequence[str], options: FormatOptions) -> None:
        if not primary_key:
            raise LogFormatError("the upsert format needs a table with a primary key")
        super().__init__(schema, primary_key, options)
        self._key = JsonKeyFormat(schema, primary_key, options)
        self._exact = has_decimals(schema)

    def writes(self, kind: RowKind) -> bool:
        return kind is not RowKind.UPDATE_BEFORE

    def _encode_rows(self, data: pa.RecordBatch, kinds: pa.Array) -> EncodedBatch:
        keep = pc.not_equal(kinds, RowKind.UPDATE_BEFORE.value)
        rows = np.flatnonzero(keep.to_numpy(zero_copy_only=False)).astype(np.int64)
        kept = data.filter(keep)
        if kept.num_rows == 0:
            return EncodedBatch(rows, [])
        is_delete = pc.equal(kinds.filter(keep), RowKind.DELETE.value)
        text = json_objects(list(zip(kept.schema.names, kept.columns)), self.options.timestamp_standard)
        text = pc.if_else(is_delete, pa.scalar(None, pa.string()), text)  # tombstones
        return EncodedBatch(rows, list(to_bytes_list(text)))

    def _parse(self, value: bytes | None, key: bytes | None) -> list[tuple[RowKind, Row]]:
        if value is None:
            if not key:
                raise BadMessage("a tombstone without key cannot be read as a delete")
            try:
                return [(RowKind.DELETE, self._key.decode_raw(key))]  # typed with the other rows
            except ValueError as exc:
                raise BadMessage(f"bad key of a tombstone: {exc}") from exc
        try:
            obj = unwrap(loads(value, self._exact))
        except ValueError as exc:
            raise BadMessage(f"corrupt JSON row {value[:80]!r}: {exc}") from exc
        if not isinstance(obj, dict):
            raise BadMessage(f"an upsert value must be a JSON object, got {value[:80]!r}")
        return [(RowKind.UPDATE_AFTER, obj)]
