"""The file formats of the Iceberg view (filestore.views.iceberg): Iceberg's spec schemas of manifests and manifest
lists (format version 3) with the field ids Iceberg readers resolve fields by, manifests as bytes, and table schemas
as Iceberg schemas (the Arrow -> Iceberg type map and Iceberg's type promotions). No IO here.

Invariants:
1. Every Avro field carries its spec `field-id` (readers project manifests by id, not by name); a map with int keys
   is written as Iceberg writes it: an array of key/value records with `logicalType: map` and ids on key and value.
2. Only the spec fields the view fills are declared; every other optional spec field is absent from the file's
   schema, which readers read as null.
3. The partition struct of a manifest has one optional field per partition column, field ids 1000, 1001, ... in
   partition-key order (the view's partition spec), typed by `avro_type` of the column's Iceberg type.
"""
from __future__ import annotations

import io
import re
import uuid
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import fastavro
import pyarrow as pa

from filestore.schema import TableSchema

FORMAT_VERSION = 3
PARTITION_FIELD_BASE = 1000
"""The field id of the first partition field (Iceberg's convention)."""
FILE_PATH_FIELD_ID = 2147483546
"""The reserved id of a position-delete file's `file_path` column: bounds on it name the one data file a delete
file applies to."""


@dataclass(frozen=True)
class Entry:
    """One live file of an Iceberg snapshot: a data file (keyed by its path) or a deletion vector (keyed by the
    data file it references, `referenced`; `path` is its Puffin file, the blob at `offset` of `length` bytes).
    `snapshot_id` / `sequence_number`: the snapshot that added it (kept while later snapshots list it)."""

    path: str
    partition: tuple[Any, ...]
    record_count: int
    file_size: int
    snapshot_id: int
    sequence_number: int
    first_row_id: int | None = None
    referenced: str | None = None
    offset: int | None = None
    length: int | None = None


class UnsupportedTypeError(ValueError):
    """A column type the Iceberg view cannot publish."""


def iceberg_type(t: pa.DataType) -> str:
    """The Iceberg primitive type of an Arrow type (UnsupportedTypeError for nested and other types)."""
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) or \
            pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_date32(t):
        return "date"
    if pa.types.is_timestamp(t):
        base = "timestamp_ns" if t.unit == "ns" else "timestamp"
        return base + ("tz" if t.tz else "")
    if pa.types.is_decimal(t):
        return f"decimal({t.precision}, {t.scale})"
    raise UnsupportedTypeError(f"no Iceberg type for {t}")


PROMOTIONS = {("int", "long"), ("float", "double")}
"""Iceberg's type promotions (besides widening a decimal's precision at the same scale)."""


def promotable(old: str, new: str) -> bool:
    """Whether an Iceberg column of type `old` may become `new` (equal, or one of Iceberg's promotions)."""
    if old == new or (old, new) in PROMOTIONS:
        return True
    if old.startswith("decimal(") and new.startswith("decimal("):
        (p0, s0), (p1, s1) = (tuple(int(x) for x in t[8:-1].split(",")) for t in (old, new))
        return s0 == s1 and p1 >= p0
    return False


def iceberg_schema(schema: TableSchema) -> dict[str, Any]:
    """The Iceberg schema (JSON) of a table schema: same id, the table's column ids."""
    return {"type": "struct", "schema-id": schema.id, "fields": [
        {"id": fid, "name": f.name, "required": not f.nullable, "type": iceberg_type(f.type)}
        for fid, f in zip(schema.field_ids, schema.arrow_schema)]}


def unpromotable(previous: Mapping[str, Any] | None, new: Mapping[str, Any]) -> str | None:
    """Why Iceberg schema `new` cannot follow `previous` (a column's type changed other than by a promotion), or
    None when it can."""
    if previous is None:
        return None
    old = {f["id"]: f["type"] for f in previous["fields"]}
    for f in new["fields"]:
        if f["id"] in old and not promotable(old[f["id"]], f["type"]):
            return f"column {f['name']!r} changed type {old[f['id']]} -> {f['type']}, which Iceberg cannot promote"
    return None


def name_mapping(schemas: Sequence[TableSchema], system_ids: Mapping[str, int]) -> list[dict[str, Any]] | str:
    """Iceberg's name mapping of every column of `schemas` (newest first; dropped columns included: older files
    hold them), each with every name it has had, newest first, plus `system_ids` (columns of the files no schema
    lists: readers refuse a file column the mapping lacks). A str saying why when one name meant two columns
    (files name columns by name: such a table cannot be mapped)."""
    names: dict[int, list[str]] = {}
    owner: dict[str, int] = {}
    for schema in schemas:
        for fid, name in zip(schema.field_ids, schema.arrow_schema.names):
            if owner.setdefault(name, fid) != fid:
                return (f"column name {name!r} was used by two columns (ids {owner[name]} and {fid}); Iceberg "
                        "readers map the data files' columns by name")
            if name not in names.setdefault(fid, []):
                names[fid].append(name)
    return [*({"field-id": fid, "names": n} for fid, n in names.items()),
            *({"field-id": fid, "names": [name]} for name, fid in system_ids.items())]


def table_metadata(previous: Mapping[str, Any], snapshot: Mapping[str, Any], retained: Sequence[Mapping[str, Any]],
                   schema: TableSchema, schemas: Sequence[Mapping[str, Any]], spec: Sequence[Mapping[str, Any]],
                   location: str, properties: Mapping[str, str], next_row_id: int,
                   previous_file: str | None) -> dict[str, Any]:
    """The v3 table metadata whose current snapshot is `snapshot`, following `previous` (the metadata in
    `previous_file`, {} for none): the `retained` snapshots of it kept (and their log entries), the current schema
    `schema` among `schemas`, one partition spec (`spec`'s fields, id 0), no sort order."""
    kept = {s["snapshot-id"] for s in retained} | {snapshot["snapshot-id"]}
    metadata_log = [m for m in previous.get("metadata-log", []) if _version_in(m["metadata-file"], kept)]
    if previous_file is not None and _version_in(previous_file, kept):
        metadata_log.append({"timestamp-ms": previous["last-updated-ms"], "metadata-file": previous_file})
    table_uuid = str(uuid.UUID(schema.uuid)) if schema.uuid else str(uuid.uuid5(uuid.NAMESPACE_URL, location))
    return {
        "format-version": FORMAT_VERSION, "table-uuid": previous.get("table-uuid", table_uuid),
        "location": location, "last-sequence-number": snapshot["sequence-number"],
        "last-updated-ms": snapshot["timestamp-ms"],
        "last-column-id": max([schema.highest_field_id, int(previous.get("last-column-id", 0)), *schema.field_ids]),
        "current-schema-id": schema.id, "schemas": sorted(schemas, key=lambda s: s["schema-id"]),
        "default-spec-id": 0, "partition-specs": [{"spec-id": 0, "fields": list(spec)}],
        "last-partition-id": PARTITION_FIELD_BASE - 1 + len(spec),
        "default-sort-order-id": 0, "sort-orders": [{"order-id": 0, "fields": []}],
        "properties": dict(properties), "current-snapshot-id": snapshot["snapshot-id"],
        "snapshots": [*retained, snapshot],
        "snapshot-log": [*(s for s in previous.get("snapshot-log", []) if s["snapshot-id"] in kept),
                         {"timestamp-ms": snapshot["timestamp-ms"], "snapshot-id": snapshot["snapshot-id"]}],
        "metadata-log": metadata_log[-20:],
        "refs": {"main": {"snapshot-id": snapshot["snapshot-id"], "type": "branch"}},
        "next-row-id": next_row_id,
    }


def _version_in(metadata_file: str, versions: set[int]) -> bool:
    m = re.search(r"/v(\d+)\.metadata\.json$", metadata_file)
    return m is not None and int(m.group(1)) in versions


def avro_type(iceberg: str) -> Any:
    """The Avro type of a partition value of Iceberg type `iceberg` (not null)."""
    simple = {"boolean": "boolean", "int": "int", "long": "long", "float": "float", "double": "double",
              "string": "string", "binary": "bytes"}
    if iceberg in simple:
        return simple[iceberg]
    if iceberg == "date":
        return {"type": "int", "logicalType": "date"}
    if iceberg in ("timestamp", "timestamptz"):
        return {"type": "long", "logicalType": "timestamp-micros", "adjust-to-utc": iceberg == "timestamptz"}
    raise UnsupportedTypeError(f"the Iceberg view cannot partition on a column of type {iceberg}")


def _opt(name: str, type_: Any, field_id: int) -> dict[str, Any]:
    return {"name": name, "type": ["null", type_], "default": None, "field-id": field_id}


def _int_map(key_id: int, value_id: int, value: str) -> dict[str, Any]:
    return {"type": "array", "logicalType": "map", "items": {
        "type": "record", "name": f"k{key_id}_{value_id}",
        "fields": [{"name": "key", "type": "int", "field-id": key_id},
                   {"name": "value", "type": value, "field-id": value_id}]}}


def manifest_schema(partition_fields: Sequence[tuple[str, int, str]]) -> dict[str, Any]:
    """The v3 `manifest_entry` schema for a partition spec of (name, field id, Iceberg type) fields."""
    partition = {"type": "record", "name": "r102",
                 "fields": [_opt(name, avro_type(t), fid) for name, fid, t in partition_fields]}
    data_file = {"type": "record", "name": "r2", "fields": [
        {"name": "content", "type": "int", "field-id": 134},
        {"name": "file_path", "type": "string", "field-id": 100},
        {"name": "file_format", "type": "string", "field-id": 101},
        {"name": "partition", "type": partition, "field-id": 102},
        {"name": "record_count", "type": "long", "field-id": 103},
        {"name": "file_size_in_bytes", "type": "long", "field-id": 104},
        _opt("lower_bounds", _int_map(126, 127, "bytes"), 125),
        _opt("upper_bounds", _int_map(129, 130, "bytes"), 128),
        _opt("first_row_id", "long", 142),
        _opt("referenced_data_file", "string", 143),
        _opt("content_offset", "long", 144),
        _opt("content_size_in_bytes", "long", 145),
    ]}
    return {"type": "record", "name": "manifest_entry", "fields": [
        {"name": "status", "type": "int", "field-id": 0},
        _opt("snapshot_id", "long", 1),
        _opt("sequence_number", "long", 3),
        _opt("file_sequence_number", "long", 4),
        {"name": "data_file", "type": data_file, "field-id": 2},
    ]}


MANIFEST_LIST_SCHEMA: dict[str, Any] = {"type": "record", "name": "manifest_file", "fields": [
    {"name": "manifest_path", "type": "string", "field-id": 500},
    {"name": "manifest_length", "type": "long", "field-id": 501},
    {"name": "partition_spec_id", "type": "int", "field-id": 502},
    {"name": "content", "type": "int", "field-id": 517},
    {"name": "sequence_number", "type": "long", "field-id": 515},
    {"name": "min_sequence_number", "type": "long", "field-id": 516},
    {"name": "added_snapshot_id", "type": "long", "field-id": 503},
    {"name": "added_files_count", "type": "int", "field-id": 504},
    {"name": "existing_files_count", "type": "int", "field-id": 505},
    {"name": "deleted_files_count", "type": "int", "field-id": 506},
    {"name": "added_rows_count", "type": "long", "field-id": 512},
    {"name": "existing_rows_count", "type": "long", "field-id": 513},
    {"name": "deleted_rows_count", "type": "long", "field-id": 514},
    _opt("partitions", {"type": "array", "items": {"type": "record", "name": "r508", "fields": [
        {"name": "contains_null", "type": "boolean", "field-id": 509},
        _opt("contains_nan", "boolean", 518),
        _opt("lower_bound", "bytes", 510),
        _opt("upper_bound", "bytes", 511)]}, "element-id": 508}, 507),
    _opt("first_row_id", "long", 520),
]}


def write_avro(schema: Mapping[str, Any], records: Iterable[Mapping[str, Any]], metadata: Mapping[str, str]) -> bytes:
    """An Avro container file of `records` (deflate-compressed) with the key-value `metadata` Iceberg asks for."""
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(dict(schema)), list(records), codec="deflate",
                    metadata=dict(metadata))
    return out.getvalue()


def read_avro(data: bytes) -> list[dict[str, Any]]:
    """The records of an Avro container file."""
    return [dict(r) for r in fastavro.reader(io.BytesIO(data))]  # type: ignore[arg-type]


def manifest(entries: Sequence[Entry], snapshot_id: int, seq: int, content: int, avro_schema: Mapping[str, Any],
             kv: Mapping[str, str], partition_names: Sequence[str], file_format: str,
             uri: str) -> tuple[bytes, dict[str, Any]]:
    """A manifest (at `uri`) of `entries` of `content` (0 data, 1 deletes) written by snapshot `snapshot_id` of
    sequence number `seq`, and its manifest-list row. An entry that snapshot added is ADDED, any other EXISTING
    with the snapshot and sequence number that added it. A deletion vector gets `file_path` bounds on the one data
    file it references (so readers index it by that file)."""
    records = []
    for e in entries:
        bounds = None if e.referenced is None else [{"key": FILE_PATH_FIELD_ID, "value": e.referenced.encode()}]
        records.append({
            "status": 1 if e.snapshot_id == snapshot_id else 0, "snapshot_id": e.snapshot_id,
            "sequence_number": e.sequence_number, "file_sequence_number": e.sequence_number,
            "data_file": {"content": content, "file_path": e.path,
                          "file_format": "PUFFIN" if content else file_format.upper(),
                          "partition": dict(zip(partition_names, e.partition)),
                          "record_count": e.record_count, "file_size_in_bytes": e.file_size,
                          "lower_bounds": bounds, "upper_bounds": bounds, "first_row_id": e.first_row_id,
                          "referenced_data_file": e.referenced, "content_offset": e.offset,
                          "content_size_in_bytes": e.length}})
    payload = write_avro(avro_schema, records, kv)
    added = [e for e in entries if e.snapshot_id == snapshot_id]
    existing = [e for e in entries if e.snapshot_id != snapshot_id]
    row = {"manifest_path": uri, "manifest_length": len(payload), "partition_spec_id": 0,
           "content": content, "sequence_number": seq,
           "min_sequence_number": min(e.sequence_number for e in entries), "added_snapshot_id": snapshot_id,
           "added_files_count": len(added), "existing_files_count": len(existing), "deleted_files_count": 0,
           "added_rows_count": sum(e.record_count for e in added),
           "existing_rows_count": sum(e.record_count for e in existing), "deleted_rows_count": 0,
           "partitions": None,
           "first_row_id": min((e.first_row_id for e in added if e.first_row_id is not None), default=None)}
    return payload, row
