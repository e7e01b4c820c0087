"""The one small interface every log format implements, its option parsing, and the shared decode step.

A value format turns (RowKind, row) pairs into Kafka record values and back; a key format turns the
primary-key fields into record keys. Batch versions take / give Arrow batches with a `_row_kind` column.

Invariants:
1. `encode_batch` never reorders rows: `EncodedBatch.rows[i]` is the input row that produced `values[i]`
   (a format may drop kinds it does not write, e.g. upsert drops -U).
2. `decode_batch` keeps message order; `DecodedBatch.messages[j]` is the input message of output row j.
3. A bad message is either skipped and counted (`ignore-parse-errors`) or raised as LogFormatError naming
   the topic, partition and offset the caller passed in; never half-decoded.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from logstore.changes import ROW_KIND_COLUMN, RowKind, row_kinds_of
from logstore.errors import LogFormatError
from logstore.formats.jsonvalues import ColumnError, TimestampStandard, check_schema, column_from_values

Row = dict[str, Any]
_KIND_BY_VALUE = {k.value: k for k in RowKind}


@dataclass(frozen=True)
class MessageRef:
    """Where a message came from, for error reports."""

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


@dataclass(frozen=True, eq=False)
class EncodedBatch:
    """Record values of a batch: `rows[i]` (index into the input batch) produced `values[i]` (None = tombstone)."""

    rows: np.ndarray
    values: list[bytes | None]


@dataclass(frozen=True, eq=False)
class DecodedBatch:
    """Decoded rows (with `_row_kind` first), the input message of each row, and the skipped bad messages."""

    batch: pa.RecordBatch
    messages: np.ndarray
    skipped: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class FormatOptions:
    """Options of one format, parsed once from `<format>.<option>` keys (Flink's names)."""

    schema_include: bool = False
    ignore_parse_errors: bool = False
    timestamp_standard: TimestampStandard = "SQL"
    namespace: str = "tablestore"
    source: tuple[tuple[str, str], ...] = ()


_BOOL = {"true": True, "false": False}


def parse_options(prefix: str, options: Mapping[str, str], allowed: frozenset[str]) -> FormatOptions:
    """Read `<prefix>.<key>` options; unknown keys under the prefix or bad values raise LogFormatError."""
    found: dict[str, Any] = {}
    source: list[tuple[str, str]] = []
    for key, raw in options.items():
        if not key.startswith(prefix + "."):
            continue
        name = key[len(prefix) + 1:]
        value = str(raw)
        if name.startswith("source.") and "source" in allowed:
            source.append((name[len("source."):], value))
        elif name not in allowed:
            raise LogFormatError(f"unknown option {key!r}; {prefix} accepts {sorted(allowed)}")
        elif name in ("schema-include", "ignore-parse-errors"):
            if value.lower() not in _BOOL:
                raise LogFormatError(f"option {key!r} must be true or false, not {value!r}")
            found[name.replace("-", "_")] = _BOOL[value.lower()]
        elif name == "timestamp-format.standard":
            if value.upper() not in ("SQL", "ISO-8601"):
                raise LogFormatError(f"option {key!r} must be SQL or ISO-8601, not {value!r}")
            found["timestamp_standard"] = value.upper()
        elif name == "namespace":
            found["namespace"] = value
    return FormatOptions(source=tuple(sorted(source)), **found)


class LogFormat(Protocol):
    """A value format: (RowKind, row) <-> Kafka record value."""

    name: str
    schema: pa.Schema
    parse_errors: int  # bad messages skipped so far (ignore-parse-errors)

    def writes(self, kind: RowKind) -> bool:
        """Whether a change of this kind produces a record (upsert drops -U)."""

    def encode(self, kind: RowKind, row: Row) -> bytes | None:
        """The record value of one change (None = tombstone); LogFormatError for a kind it does not write."""

    def encode_batch(self, batch: pa.RecordBatch) -> EncodedBatch:
        """Record values of a batch holding the table's columns and `_row_kind` (all +I when absent)."""

    def decode(self, value: bytes | None, key: bytes | None = None, ref: MessageRef | None = None) -> list[tuple[RowKind, Row]]:
        """The changes one record carries (none for a debezium tombstone)."""

    def decode_batch(self, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None,
                     refs: Sequence[MessageRef] | None = None) -> DecodedBatch:
        """Decode many records into one Arrow batch with a `_row_kind` column."""


class KeyFormat(Protocol):
    """A key format: primary-key fields <-> Kafka record key."""

    name: str
    key_schema: pa.Schema

    def encode(self, row: Row) -> bytes: ...

    def encode_batch(self, batch: pa.RecordBatch) -> list[bytes]: ...

    def decode(self, key: bytes) -> Row: ...


# -------------------------------------------------------------------------------------- shared implementation


class BadMessage(Exception):
    """Raised by a format's per-message parser; becomes a skip or a LogFormatError with the message's ref."""


Parser = Callable[[bytes | None, bytes | None], list[tuple[RowKind, Row]]]


def output_schema(schema: pa.Schema) -> pa.Schema:
    """Decoded batches: `_row_kind` then the table's columns, all nullable (deletes may carry only the key)."""
    fields = [pa.field(ROW_KIND_COLUMN, pa.string(), nullable=False)]
    fields += [pa.field(f.name, f.type, nullable=True) for f in schema]
    return pa.schema(fields)


class FormatBase:
    """Row-dict and batch plumbing shared by the value formats; subclasses give `_parse` and `_encode_rows`."""

    name = "base"
    option_keys: frozenset[str] = frozenset({"ignore-parse-errors"})

    def __init__(self, schema: pa.Schema, primary_key: Sequence[str], options: FormatOptions) -> None:
        check_schema(schema)
        self.schema = schema
        self.primary_key = tuple(primary_key)
        self.options = options
        self.parse_errors = 0
        self._out_schema = output_schema(schema)

    def writes(self, kind: RowKind) -> bool:
        return True

    def encode(self, kind: RowKind, row: Row) -> bytes | None:
        if not self.writes(kind):
            raise LogFormatError(f"format {self.name} writes no record for a {kind.value} change")
        batch = pa.RecordBatch.from_pylist([{**row, ROW_KIND_COLUMN: kind.value}], schema=_with_kind(self.schema))
        return self.encode_batch(batch).values[0]

    def encode_batch(self, batch: pa.RecordBatch) -> EncodedBatch:
        return self._encode_rows(select_columns(batch, self.schema), _kinds_of(batch))

    def _encode_rows(self, data: pa.RecordBatch, kinds: pa.Array) -> EncodedBatch:
        raise NotImplementedError

    def _parse(self, value: bytes | None, key: bytes | None) -> list[tuple[RowKind, Row]]:
        raise NotImplementedError

    def decode(self, value: bytes | None, key: bytes | None = None, ref: MessageRef | None = None) -> list[tuple[RowKind, Row]]:
        decoded = self.decode_batch([value], [key], [ref or MessageRef()])
        out = []
        for row in decoded.batch.to_pylist():
            kind = _KIND_BY_VALUE[row.pop(ROW_KIND_COLUMN)]
            out.append((kind, row))
        return out

    def decode_batch(self, values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None,
                     refs: Sequence[MessageRef] | None = None) -> DecodedBatch:
        return decode_messages(self, self._parse, values, keys, refs)

    def _bad(self, index: int, reason: str, refs: Sequence[MessageRef] | None) -> None:
        if self.options.ignore_parse_errors:
            self.parse_errors += 1
            return
        ref = refs[index] if refs is not None else MessageRef()
        raise LogFormatError(f"{self.name}: {reason}", topic=ref.topic, partition=ref.partition, offset=ref.offset)


def decode_messages(fmt: FormatBase, parse: Parser, values: Sequence[bytes | None],
                    keys: Sequence[bytes | None] | None, refs: Sequence[MessageRef] | None) -> DecodedBatch:
    """Parse each message, then build every column at once; a bad message is attributed, skipped or raised."""
    kinds: list[str] = []
    rows: list[Row] = []
    owner: list[int] = []
    skipped: list[int] = []
    key_list = keys if keys is not None else [None] * len(values)
    for i, (value, key) in enumerate(zip(values, key_list, strict=True)):
        try:
            changes = parse(value, key)
        except BadMessage as exc:
            fmt._bad(i, str(exc), refs)
            skipped.append(i)
            continue
        for kind, row in changes:
            kinds.append(kind.value)
            rows.append(row)
            owner.append(i)
    while True:
        try:
            columns = [column_from_values([r.get(f.name) for r in rows], f.type) for f in fmt.schema]
            break
        except ColumnError as exc:
            bad_msgs = sorted({owner[p] for p in exc.positions})
            for m in bad_msgs:  # raises on the first one unless ignore-parse-errors
                fmt._bad(m, f"field value: {exc.reason}", refs)
            skipped.extend(bad_msgs)
            drop = set(bad_msgs)
            keep = [j for j, m in enumerate(owner) if m not in drop]
            kinds, rows, owner = [kinds[j] for j in keep], [rows[j] for j in keep], [owner[j] for j in keep]
    batch = pa.RecordBatch.from_arrays([pa.array(kinds, pa.string()), *columns], schema=fmt._out_schema)
    return DecodedBatch(batch, np.asarray(owner, dtype=np.int64), sorted(skipped))


def select_columns(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch's columns of `schema`, in its order and types; LogFormatError if one is missing or does not cast."""
    missing = [n for n in schema.names if n not in batch.schema.names]
    if missing:
        raise LogFormatError(f"batch lacks the columns {missing}")
    arrays = []
    for f in schema:
        arr = batch.column(f.name)
        if arr.type != f.type:
            try:
                arr = arr.cast(f.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise LogFormatError(f"column {f.name!r} of type {arr.type} does not cast to {f.type}: {exc}") from exc
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, names=schema.names)


def _with_kind(schema: pa.Schema) -> pa.Schema:
    return schema.append(pa.field(ROW_KIND_COLUMN, pa.string()))


def _kinds_of(batch: pa.RecordBatch) -> pa.Array:
    """The batch's checked `_row_kind` column (all +I when absent): logstore.changes owns both rules."""
    kinds = row_kinds_of(batch)
    return kinds.combine_chunks() if isinstance(kinds, pa.ChunkedArray) else kinds
