"""A table's metadata as tables, as Paimon's system tables show it: `$schemas`, `$options`, `$partitions`,
`$buckets`, `$manifests`, `$tags` (tablestore.tags), `$consumers` (tablestore.consumers) and `$audit_log`, plus
`$latest_changes` (`$snapshots` and `$files` are `Table.snapshots()` / `Table.files()`).

Each is one read of the owner of the data (the schema manager, the table's options, the latest snapshot's live
files and manifests, its merged rows, its changes) returned as a `pyarrow.Table` whose column names are Paimon's
where the concept is the same. The Spark SQL catalog serves them as `` db.`t$<name>` `` (tablestore/spark/
sql_actions.py), the CLI as `tablestore system db.t <name>`, the Python API as `Table.system_table(name)`.

- `audit_log` (Paimon's meaning): every live row of the latest snapshot (the merged read `Table.read()` gives)
  behind a first column `rowkind`, the row kind of the record that won the merge for its key. The file store keeps
  only ADD or DELETE per record (on-disk `_VALUE_KIND`, filestore.meta.ValueKind: +I and +U are both written as
  ADD, tablestore.convert.value_kinds) and the merged read drops deletes, so every live row is `+I` (Paimon, whose
  files keep +U, would show `+U` for a row last written as an update).
- `latest_changes` (ours): the changes the latest snapshot committed, `_row_kind` (+I/-U/+U/-D) and the table's
  columns, as its changelog (tablestore.snapshot_changes); empty when it is a compaction.
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING, Callable

import pyarrow as pa

import catalog
import logstore
from filestore import SchemaManager
from tablestore.errors import TableStoreError
from tablestore.consumers import consumers_table
from tablestore.snapshot_changes import snapshot_changes
from tablestore.tags import tags_table

if TYPE_CHECKING:
    from catalog import CatalogTable

_TIME = pa.timestamp("ms", tz="UTC")
_STRINGS = pa.list_(pa.string())
_OPTIONS = pa.map_(pa.string(), pa.string())

SCHEMAS = pa.schema([("schema_id", pa.int64()), ("fields", pa.string()), ("partition_keys", _STRINGS),
                     ("primary_keys", _STRINGS), ("options", _OPTIONS), ("comment", pa.string()),
                     ("update_time", _TIME)])
OPTIONS = pa.schema([("key", pa.string()), ("value", pa.string())])
PARTITIONS = pa.schema([("partition", pa.string()), ("record_count", pa.int64()),
                        ("file_size_in_bytes", pa.int64()), ("file_count", pa.int64()),
                        ("last_update_time", _TIME)])
BUCKETS = pa.schema([("partition", pa.string()), ("bucket", pa.int32()), ("record_count", pa.int64()),
                     ("file_size_in_bytes", pa.int64()), ("file_count", pa.int64()), ("last_update_time", _TIME)])
MANIFESTS = pa.schema([("file_name", pa.string()), ("file_size", pa.int64()), ("num_added_files", pa.int64()),
                       ("num_deleted_files", pa.int64()), ("schema_id", pa.int64())])


def _partition(names: tuple[str, ...], values: tuple[str, ...]) -> str:
    """Hive style, as Spark's SHOW PARTITIONS and the `$files` table print it: `dt=2024-01-01/region=eu` ('' for a
    table without partition columns)."""
    return "/".join(f"{k}={'null' if v is None else v}" for k, v in zip(names, values))


def schemas(handle: "CatalogTable") -> pa.Table:
    """Every schema the table has had, oldest first: its columns (JSON: name, type, nullable), keys, options."""
    store = handle.store
    rows = []
    for schema_id in SchemaManager(store.io, store.paths).schema_ids():
        s = store.schema_of(schema_id)
        fields = [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in s.arrow_schema]
        rows.append({"schema_id": s.id, "fields": json.dumps(fields), "partition_keys": list(s.partition_keys),
                     "primary_keys": list(s.primary_keys), "options": list(catalog.redact_options(s.options).items()),
                     "comment": s.comment, "update_time": s.time_millis})
    return pa.Table.from_pylist(rows, SCHEMAS)


def options(handle: "CatalogTable") -> pa.Table:
    """The options the table was created (or altered) with, by key."""
    raw = dict(handle.options.raw)
    keys = sorted(raw)
    return pa.table({"key": keys, "value": [str(raw[k]) for k in keys]}, OPTIONS)


def _groups(handle: "CatalogTable", by_bucket: bool) -> pa.Table:
    store = handle.store
    live = store.live_files(store.snapshots.latest())
    names = tuple(store.schema.partition_keys)
    totals: dict[tuple[str, int], list[int]] = {}
    for e in live.entries.values():   # one entry per live file (metadata, not rows)
        total = totals.setdefault((_partition(names, e.partition), e.bucket if by_bucket else -1), [0, 0, 0, 0])
        total[0] += e.file.row_count
        total[1] += e.file.file_size
        total[2] += 1
        total[3] = max(total[3], e.file.creation_time_ms)
    rows = [{"partition": p, "bucket": b, "record_count": t[0], "file_size_in_bytes": t[1], "file_count": t[2],
             "last_update_time": t[3]} for (p, b), t in sorted(totals.items())]
    return pa.Table.from_pylist(rows, BUCKETS if by_bucket else PARTITIONS)


def partitions(handle: "CatalogTable") -> pa.Table:
    """Per partition of the latest snapshot: the rows of its files (a key rewritten in a newer sorted run counts
    once per run until compaction merges them, as in Paimon), their bytes and number, the newest file's time."""
    return _groups(handle, by_bucket=False)


def buckets(handle: "CatalogTable") -> pa.Table:
    """As `partitions`, per (partition, bucket)."""
    return _groups(handle, by_bucket=True)


def manifests(handle: "CatalogTable") -> pa.Table:
    """The manifest files the latest snapshot reads (its base and delta manifest lists)."""
    store = handle.store
    live = store.live_files(store.snapshots.latest())
    return pa.Table.from_pylist([{"file_name": m.file_name, "file_size": m.file_size,
                                  "num_added_files": m.num_added_files, "num_deleted_files": m.num_deleted_files,
                                  "schema_id": m.schema_id} for m in live.manifests], MANIFESTS)


AUDIT_LOG_ROW_KIND = "rowkind"
"""The first column of `$audit_log`, named as Paimon's."""


def audit_log(handle: "CatalogTable") -> pa.Table:
    """Every live row of the latest snapshot, as `Table.read()` gives them (all partitions), behind a first column
    `rowkind`: `+I` for each, as the file store keeps no other kind of a live record (see the module's doc)."""
    store = handle.store
    rows = store.new_read().to_table(store.new_scan().plan(store.snapshots.latest()))
    kinds = pa.repeat(pa.scalar("+I", pa.string()), rows.num_rows)
    return rows.add_column(0, pa.field(AUDIT_LOG_ROW_KIND, pa.string(), False), kinds)


def latest_changes(handle: "CatalogTable") -> pa.Table:
    """The latest snapshot's changes: `_row_kind` (+I/-U/+U/-D) and the table's columns, as the changelog of that
    commit (tablestore.snapshot_changes, what a stream of the table's changes reads for a snapshot); nothing for a
    compaction."""
    store = handle.store
    schema = pa.schema([pa.field(logstore.ROW_KIND_COLUMN, pa.string(), False), *store.schema.arrow_schema])
    latest = store.snapshots.latest()
    if latest is None:
        return schema.empty_table()
    parent = store.snapshots.get(latest.id - 1) if store.snapshots.exists(latest.id - 1) else None
    parts = [t.select(schema.names).cast(schema) for t in snapshot_changes(store, parent, latest)]
    return pa.concat_tables(parts) if parts else schema.empty_table()


SYSTEM_TABLES: dict[str, Callable[["CatalogTable"], pa.Table]] = {
    "schemas": schemas, "options": options, "partitions": partitions, "buckets": buckets,
    "manifests": manifests, "audit_log": audit_log, "latest_changes": latest_changes,
    "tags": lambda handle: tags_table(handle.store),
    "consumers": consumers_table,
}
"""The system tables this module owns, by name (without the `$`)."""


def system_table(handle: "CatalogTable", name: str) -> pa.Table:
    """The system table `name` of the table (see SYSTEM_TABLES); an unknown name is a TableStoreError."""
    read = SYSTEM_TABLES.get(name)
    if read is None:
        raise TableStoreError(f"table {handle.identifier!r}: no system table {name!r}; system tables: "
                              f"{', '.join(['snapshots', 'files', *SYSTEM_TABLES])}")
    return read(handle)
