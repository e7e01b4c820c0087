"""The Delta encodings of the Delta view (filestore.views.delta): column types, partition values and file statistics
as Delta writes them, and checkpoints: one classic V1 checkpoint Parquet file
`_delta_log/<version %020d>.checkpoint.parquet` per checkpointed version, written from and read back into the
view's replayed state (protocol, metaData and the live `add` actions).

Encodings: `delta_type` maps Arrow types to Delta's (integers, floats, strings, binary, boolean, date, timestamps of
s/ms/us with a zone -> timestamp, without -> timestamp_ntz, decimal128 -> decimal(p,s)); anything else is `Refused`
with the table and column named. Partition values are Delta's strings (a null value JSON null; timestamps with a
zone in UTC ISO-8601). Statistics are wide bounds from the manifests' order-preserving key bytes.

Checkpoint invariants:
1. One row per action, the actions as struct columns `protocol`, `metaData`, `add` and `remove` (Delta's
   PROTOCOL.md, "Checkpoint Schema"): exactly one `protocol` row, one `metaData` row, one `add` row per live logical
   file; `remove` is all null (the view keeps no tombstones: they only serve Delta's VACUUM, which must not run on
   this table's files anyway). `add.stats` is the JSON string, `add.partitionValues` a map<string,string> whose
   null values are null partition values, `add.deletionVector` the descriptor struct.
2. The checkpoint holds the complete state of its version, so readers need no JSON commit before it.
3. Reading a checkpoint back (`read_checkpoint`) gives the same actions as the JSON that built it, up to absent
   optional fields.
"""
from __future__ import annotations

import datetime as dt
import decimal
import io
import json
import re
import uuid
from typing import Any, Collection

import pyarrow as pa
import pyarrow.parquet as pq

from filestore.dvformat import delta_dv_descriptor
from filestore.keycodec import decode_value
from filestore.meta import DataFileMeta, DeletionVectorRef
from filestore.partition import partition_value

DV_NAME = re.compile(r"^deletion_vector_([0-9a-fA-F-]{36})\.bin$")


class Refused(Exception):
    """The table's history cannot be published as Delta (logged as an error; publishing stops)."""


_STRING_MAP = pa.map_(pa.string(), pa.string())
DV_STRUCT = pa.struct([("storageType", pa.string()), ("pathOrInlineDv", pa.string()), ("offset", pa.int32()),
                       ("sizeInBytes", pa.int32()), ("cardinality", pa.int64())])
PROTOCOL_STRUCT = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32()),
                             ("readerFeatures", pa.list_(pa.string())), ("writerFeatures", pa.list_(pa.string()))])
METADATA_STRUCT = pa.struct([("id", pa.string()), ("name", pa.string()), ("description", pa.string()),
                             ("format", pa.struct([("provider", pa.string()), ("options", _STRING_MAP)])),
                             ("schemaString", pa.string()), ("partitionColumns", pa.list_(pa.string())),
                             ("configuration", _STRING_MAP), ("createdTime", pa.int64())])
ADD_STRUCT = pa.struct([("path", pa.string()), ("partitionValues", _STRING_MAP), ("size", pa.int64()),
                        ("modificationTime", pa.int64()), ("dataChange", pa.bool_()), ("stats", pa.string()),
                        ("tags", _STRING_MAP), ("deletionVector", DV_STRUCT), ("baseRowId", pa.int64()),
                        ("defaultRowCommitVersion", pa.int64())])
REMOVE_STRUCT = pa.struct([("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_()),
                           ("extendedFileMetadata", pa.bool_()), ("partitionValues", _STRING_MAP),
                           ("size", pa.int64()), ("deletionVector", DV_STRUCT), ("baseRowId", pa.int64()),
                           ("defaultRowCommitVersion", pa.int64())])
TXN_STRUCT = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
CHECKPOINT_SCHEMA = pa.schema([("txn", TXN_STRUCT), ("add", ADD_STRUCT), ("remove", REMOVE_STRUCT),
                               ("metaData", METADATA_STRUCT), ("protocol", PROTOCOL_STRUCT)])


def _as_map(d: dict[str, Any] | None) -> list[tuple[str, Any]] | None:
    return None if d is None else list(d.items())


def _add_row(add: dict[str, Any]) -> dict[str, Any]:
    row = {name: add.get(name) for name in ADD_STRUCT.names}
    row["partitionValues"] = _as_map(add.get("partitionValues", {}))
    row["tags"] = _as_map(add.get("tags"))
    return row


def write_checkpoint(protocol: dict[str, Any], metadata: dict[str, Any],
                     adds: list[dict[str, Any]]) -> tuple[bytes, int]:
    """The checkpoint Parquet bytes of a state, and its number of actions (rows: `_last_checkpoint`'s `size`)."""
    n = 2 + len(adds)
    meta = {**metadata, "format": {**metadata["format"], "options": _as_map(metadata["format"].get("options", {}))},
            "configuration": _as_map(metadata.get("configuration", {}))}
    columns = {
        "txn": pa.nulls(n, TXN_STRUCT),
        "add": pa.array([None, None, *(_add_row(a) for a in adds)], ADD_STRUCT),
        "remove": pa.nulls(n, REMOVE_STRUCT),
        "metaData": pa.array([None, {k: meta.get(k) for k in METADATA_STRUCT.names}, *([None] * len(adds))],
                             METADATA_STRUCT),
        "protocol": pa.array([{k: protocol.get(k) for k in PROTOCOL_STRUCT.names}, *([None] * (n - 1))],
                             PROTOCOL_STRUCT),
    }
    sink = io.BytesIO()
    pq.write_table(pa.table(columns, schema=CHECKPOINT_SCHEMA), sink)
    return sink.getvalue(), n


def _without_nulls(value: Any) -> Any:
    """A checkpoint row as its JSON action: maps back to dicts (null values kept), absent fields dropped."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def read_checkpoint(data: bytes) -> tuple[dict[str, Any] | None, dict[str, Any] | None, list[dict[str, Any]]]:
    """The protocol, metaData and add actions of a checkpoint (any classic single-file checkpoint)."""
    table = pq.read_table(io.BytesIO(data))
    protocol = metadata = None
    adds: list[dict[str, Any]] = []
    names = set(table.column_names)
    if "protocol" in names:
        protocol = next((_without_nulls(p) for p in table.column("protocol").to_pylist() if p is not None), None)
    if "metaData" in names:
        for m in table.column("metaData").to_pylist():
            if m is not None:
                m["format"] = {**(m.get("format") or {}), "options": dict((m.get("format") or {}).get("options")
                                                                          or [])}
                m["configuration"] = dict(m.get("configuration") or [])
                metadata = _without_nulls(m)
    if "add" in names:
        for a in table.column("add").to_pylist():  # one Python dict per file, not per data row
            if a is None:
                continue
            values = dict(a.get("partitionValues") or [])
            tags = a.get("tags")
            a = _without_nulls({**a, "partitionValues": None, "tags": None, "partitionValues_parsed": None,
                                "stats_parsed": None})
            a["partitionValues"] = values
            if tags:
                a["tags"] = dict(tags)
            adds.append(a)
    return protocol, metadata, adds


def delta_type(table_name: str, column: str, t: pa.DataType) -> str:
    """The Delta type of an Arrow type; `Refused` (naming the table and column) for a type Delta lacks."""
    simple = {pa.int8(): "byte", pa.int16(): "short", pa.int32(): "integer", pa.int64(): "long",
              pa.float32(): "float", pa.float64(): "double", pa.string(): "string", pa.large_string(): "string",
              pa.binary(): "binary", pa.large_binary(): "binary", pa.bool_(): "boolean", pa.date32(): "date"}
    for arrow, name in simple.items():
        if t.equals(arrow):
            return name
    if pa.types.is_timestamp(t) and t.unit != "ns":
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal128(t) and t.precision <= 38:
        return f"decimal({t.precision},{t.scale})"
    raise Refused(f"table {table_name}: column {column!r} has type {t}, which the Delta view cannot express")


def partition_string(table_name: str, column: str, rendered: str, t: pa.DataType) -> str | None:
    """Delta's partition value string of a rendered partition value (None: a null value)."""
    v = partition_value(rendered, t).as_py()
    if v is None:
        return None
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            return v.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(v, dt.date):
        return v.isoformat()
    if isinstance(v, decimal.Decimal):
        return format(v, "f")
    if isinstance(v, (bytes, bytearray)):
        raise Refused(f"table {table_name}: binary partition column {column!r} cannot be a Delta partition value")
    return str(v)


def file_stats(f: DataFileMeta, file_schema: pa.Schema, columns: Collection[str]) -> str:
    """`add.stats` of a data file written under `file_schema`, from its manifest column stats (no data read):
    `numRecords` (physical rows), `tightBounds` false, `nullCount` and, where lossless, `minValues`/`maxValues`,
    of `columns` (the view's non-partition columns) only."""
    file_types = dict(zip(file_schema.names, file_schema.types))
    lows: dict[str, Any] = {}
    highs: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for s in f.stats:
        t = file_types.get(s.column)
        if s.column not in columns or t is None:
            continue
        nulls[s.column] = s.null_count
        for raw, out in ((s.min, lows), (s.max, highs)):
            value = stat_value(raw, t)
            if value is not None:
                out[s.column] = value
    return json.dumps({"numRecords": f.row_count, "tightBounds": False, "minValues": lows, "maxValues": highs,
                       "nullCount": nulls}, separators=(",", ":"))


def stat_value(raw: bytes | None, t: pa.DataType) -> Any:
    """A min/max as Delta's stats JSON holds it, or None when not given (types whose JSON form is lossy)."""
    if raw is None or not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_string(t)
                           or pa.types.is_large_string(t) or pa.types.is_date32(t)):
        return None
    v = decode_value(raw, t)
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    return v.isoformat() if isinstance(v, dt.date) else v


def dv_descriptor(ref: DeletionVectorRef) -> dict[str, Any]:
    """Delta's descriptor of one of the table's vectors (a Delta DV file under the table directory)."""
    directory, _, name = ref.path.rpartition("/")
    m = DV_NAME.match(name)
    if m is None:
        raise Refused(f"deletion vector file {ref.path!r} is not named deletion_vector_<uuid>.bin")
    return delta_dv_descriptor(directory, uuid.UUID(m.group(1)), ref.offset, ref.size, ref.cardinality)
