"""The Delta Lake view (`metadata.delta.enabled`): every snapshot of the table also published as a version of a Delta
table in the table's own directory (`<table>/_delta_log/`), so delta-rs, delta-spark and other Delta readers read the
table's data files in place.

Layout (each file written once; `_last_checkpoint` is only a hint):
    _delta_log/<version %020d>.json                 the actions of one version (created exclusively)
    _delta_log/<version %020d>.checkpoint.parquet   every CHECKPOINT_INTERVAL versions (views.delta_checkpoint)
    _delta_log/_last_checkpoint                     {"version", "size"} of the latest checkpoint

Invariants:
1. Mapping: tablestore snapshot S is Delta version S - 1 (`delta_version`); the table is created with the option, so
   snapshot 1 is version 0. Every version's `commitInfo` holds `"tablestore.snapshotId": S`.
2. Versions are contiguous and published in order. A commit publishes every version from the one after the latest
   in the log up to its own snapshot (catch-up: a crash or a failed publish between a snapshot and its Delta commit
   is repaired at the next commit). A version file is created exclusively: of two racing publishers one wins and the
   other stops there (idempotent). Nothing but the log is the view's state: the published state (protocol, metaData,
   the live logical files) is replayed from the latest checkpoint and the JSON commits after it (kept in a
   per-process cache while the log has not moved), and each version is the difference between that state and the
   snapshot's files: `remove` (with the old `deletionVector`) for a published file no longer listed or whose vector
   changed, `add` for a listed file not published or whose vector changed. So a snapshot expired before it was
   published gets an empty version (`commitInfo` only, `"tablestore.expired": true`) and the next retained snapshot's
   version moves straight from the last published state to its own files.
   A log whose first version is not 0 (the option turned on after the earliest retained snapshot) starts with the
   full state at that version and a checkpoint of it.
3. Version 0 (or the first) holds `protocol` (reader 3 / writer 7, feature `deletionVectors`, and `timestampNtz`
   when a column is a timestamp without time zone; writer feature `invariants` when a column is NOT NULL; column
   mapping is not used) and `metaData` (id = the table's uuid, the Delta schema of the user columns,
   `partitionColumns` = the partition keys, `delta.enableDeletionVectors` = "true", and
   `delta.checkpoint.writeStatsAsStruct` = "false": checkpoints hold no `*_parsed` columns). A later version holds
   a new `metaData` (and `protocol`, when a feature is added) when the user columns changed. Columns added or dropped
   are expressible (data files name columns by their name at write time; Delta readers read columns by name and
   ignore the others, as they ignore the system columns `_SEQUENCE_NUMBER`, `_VALUE_KIND`, `_VALUE_COUNT`, and read
   partition columns from `partitionValues`, not from the files that also hold them). A rename, a type change, a
   name used by two columns over the table's history, or a column type Delta lacks (`delta_type`) cannot be
   expressed without Delta column mapping: publishing stops at the last good version with an error naming the table
   and the column (logged; the commit is unaffected, and every later commit logs it again).
4. What a version lists reads exactly as the table, with one documented exception:
   - deletion vectors (`deletion-vectors.enabled`): every live file, with its vector as the `deletionVector`
     descriptor of the table's own DV file (`dv/deletion_vector_<uuid>.bin`, random prefix "dv").
   - a primary-key table without deletion vectors: a bucket is listed only when its files are one sorted run
     without DELETE records (fully compacted); otherwise its previously published files stay listed, so the view
     lags in that bucket until compaction; never a key twice, never a deleted key. Expiry and orphan removal
     keep every file the latest version lists (`listed_files`; filestore.expire), so a lagging bucket's files stay
     readable after a compaction has replaced them in the table.
   - a table without a primary key: a bucket is listed when none of its records retracts (`_VALUE_COUNT` < 1, read
     once per file), else it lags as above. INEXACT: a record of `_VALUE_COUNT` n > 1 (the same row written n
     times, merged) reads as ONE row in a Delta reader, which does not know the count column.
5. `add.stats`: `numRecords` = the file's physical row count, `tightBounds` false (wide bounds, valid with vectors),
   `nullCount` and, for numbers, strings and dates, `minValues`/`maxValues`, of the non-partition columns.
   A compaction's actions have `dataChange` false on a deletion-vector table (no row changes); elsewhere a
   compaction can end a bucket's lag, so they say true.
Never write to the view with a Delta writer or run Delta's VACUUM on it: the files belong to the table store.
"""
from __future__ import annotations

import json
import logging
import re
import time
import urllib.parse
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from filestore import dvformat
from filestore.errors import SnapshotNotFoundError
from filestore.live import LiveFiles
from filestore.views import plain_bucket
from filestore.merge_keys import COUNT
from filestore.meta import CommitKind, DataFileMeta, Partition
from filestore.schema import SchemaManager, TableSchema
from filestore.views.delta_checkpoint import (Refused, delta_type, dv_descriptor, file_stats, partition_string,
                                             read_checkpoint, write_checkpoint)

if TYPE_CHECKING:
    from filestore.context import StoreContext

NAME = "Delta Lake"
LOG_DIR = "_delta_log"
LAST_CHECKPOINT = "_last_checkpoint"
CHECKPOINT_INTERVAL = 10
_JSON = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint\.parquet$")
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _State:
    """The published state of Delta version `version`: its protocol, metaData and live logical files by path."""

    version: int
    protocol: Mapping[str, Any]
    metadata: Mapping[str, Any]
    adds: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


_cache: dict[tuple[str, str | None], _State] = {}


def delta_version(snapshot_id: int) -> int:
    """The Delta version publishing tablestore snapshot `snapshot_id` (invariant 1)."""
    return snapshot_id - 1


def publish(context: "StoreContext", live: LiveFiles) -> None:
    """Publish every version up to `live`'s snapshot that the log lacks, in order (invariant 2)."""
    if live.snapshot is None:
        return
    state = _load(context)
    if state is not None and state.version >= delta_version(live.snapshot.id):
        return
    first = state.version + 2 if state is not None else (context.snapshots.earliest_id() or live.snapshot.id)
    for sid in range(first, live.snapshot.id + 1):
        target: LiveFiles | None = live
        if sid != live.snapshot.id:
            try:
                target = context.live_files(context.snapshots.get(sid))
            except SnapshotNotFoundError:
                target = None  # expired: an empty version (invariant 2)
        if target is None and state is None:
            continue  # nothing published yet: the log starts at the first retained snapshot
        try:
            published = _publish_version(context, state, sid, target)
        except Refused as e:
            log.error("table %s: the Delta view stops at version %s: %s", context.table_name,
                      None if state is None else state.version, e)
            return
        if published is None:
            return  # another publisher created this version first: it goes on from there
        state = published


def listed_files(context: "StoreContext") -> set[str]:
    """The table's files the latest version lists: its data files and the deletion-vector files their descriptors
    name (paths as the table's file IO names them)."""
    state = _load(context)
    if state is None:
        return set()
    root = context.paths.root
    found = set()
    for path, add in state.adds.items():
        found.add(f"{root}/{urllib.parse.unquote(path)}")
        dv = add.get("deletionVector")
        if dv and dv.get("storageType") == "u":
            text = dv["pathOrInlineDv"]
            prefix, encoded = text[:-20], text[-20:]
            name = dvformat.dv_file_name(uuid.UUID(bytes=dvformat.z85_decode(encoded, 16)))
            found.add(f"{root}/{prefix}/{name}" if prefix else f"{root}/{name}")
    return found


# -- the log ----------------------------------------------------------------------------------------------------
def _log_path(context: "StoreContext", name: str) -> str:
    return f"{context.paths.root}/{LOG_DIR}/{name}"


def _json_name(version: int) -> str:
    return f"{version:020d}.json"


def _checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def _dv_id(action: Mapping[str, Any]) -> str | None:
    """Delta's `uniqueId` of an action's deletion vector (None: no vector)."""
    dv = action.get("deletionVector")
    if not dv:
        return None
    return f"{dv['storageType']}{dv['pathOrInlineDv']}" + (f"@{dv['offset']}" if dv.get("offset") is not None else "")


def _apply(state: _State | None, version: int, actions: list[dict[str, Any]]) -> _State:
    """`state` after one version's actions: removes first, then adds (Delta's reconciliation)."""
    protocol = next((a["protocol"] for a in actions if "protocol" in a), None)
    metadata = next((a["metaData"] for a in actions if "metaData" in a), None)
    adds = dict(state.adds) if state is not None else {}
    for a in actions:
        r = a.get("remove")
        if r is not None and r["path"] in adds and _dv_id(adds[r["path"]]) == _dv_id(r):
            del adds[r["path"]]
    for a in actions:
        if "add" in a:
            adds[a["add"]["path"]] = a["add"]
    protocol = protocol if protocol is not None else (state.protocol if state else {})
    metadata = metadata if metadata is not None else (state.metadata if state else {})
    return _State(version, protocol, metadata, adds)


def _read_json(context: "StoreContext", version: int) -> list[dict[str, Any]]:
    text = context.io.read_bytes(_log_path(context, _json_name(version))).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _load(context: "StoreContext") -> _State | None:
    """The state of the latest version in the log (None: an empty log), replayed from its latest checkpoint."""
    io = context.io
    key = (context.paths.root, context.schema.uuid)
    cached = _cache.get(key)
    if cached is not None and io.exists(_log_path(context, _json_name(cached.version))) and not io.exists(
            _log_path(context, _json_name(cached.version + 1))):
        return cached
    names = [s.path.rsplit("/", 1)[-1] for s in io.list_dir(f"{context.paths.root}/{LOG_DIR}")]
    versions = sorted(int(m.group(1)) for m in map(_JSON.match, names) if m)
    if not versions:
        return None
    latest = versions[-1]
    while io.exists(_log_path(context, _json_name(latest + 1))):
        latest += 1
    checkpoints = [int(m.group(1)) for m in map(_CHECKPOINT.match, names) if m and int(m.group(1)) <= latest]
    state: _State | None = None
    if checkpoints:
        start = max(checkpoints)
        protocol, metadata, adds = read_checkpoint(io.read_bytes(_log_path(context, _checkpoint_name(start))))
        state = _State(start, protocol or {}, metadata or {}, {a["path"]: a for a in adds})
    else:
        start = versions[0]
        state = _apply(None, start, _read_json(context, start))
        if start > 0:  # a log that starts later needs its checkpoint (a crash came between the two)
            _write_checkpoint(context, state)
    for version in range(start + 1, latest + 1):
        state = _apply(state, version, _read_json(context, version))
    _cache.clear()
    _cache[key] = state
    return state


def _write_checkpoint(context: "StoreContext", state: _State) -> None:
    data, size = write_checkpoint(dict(state.protocol), dict(state.metadata), [dict(a) for a in state.adds.values()])
    context.io.create_exclusive(_log_path(context, _checkpoint_name(state.version)), data)
    context.io.replace_hint(_log_path(context, LAST_CHECKPOINT),
                            json.dumps({"version": state.version, "size": size}).encode())


# -- one version -------------------------------------------------------------------------------------------------
def _publish_version(context: "StoreContext", state: _State | None, sid: int,
                     target: LiveFiles | None) -> _State | None:
    """Write the version of snapshot `sid` (None `target`: expired) on top of `state`: the new state, or None when
    another publisher created that version first."""
    version = delta_version(sid)
    actions: list[dict[str, Any]] = []
    info: dict[str, Any] = {"timestamp": 0, "operation": "WRITE", "operationParameters": {"mode": "Append"},
                            "engineInfo": "tablestore", "tablestore.snapshotId": sid}
    if target is None:
        info.update({"timestamp": int(time.time() * 1000), "tablestore.expired": True})
    else:
        assert target.snapshot is not None
        snap = target.snapshot
        schema = context.schema_of(snap.schema_id)
        protocol, metadata = _protocol_and_metadata(context, schema, snap.time_millis, state)
        if state is None or dict(protocol) != dict(state.protocol):
            actions.append({"protocol": protocol})
        if state is None or _schema_changed(metadata, state.metadata):
            actions.append({"metaData": metadata})
        data_change = not (snap.commit_kind == CommitKind.COMPACT and context.options.deletion_vectors)
        wanted = _target(context, schema, state, target)
        published = state.adds if state is not None else {}
        removes = [p for p, a in published.items() if p not in wanted or _dv_id(wanted[p]) != _dv_id(a)]
        for p in sorted(removes):
            old = published[p]
            actions.append({"remove": {"path": p, "deletionTimestamp": snap.time_millis, "dataChange": data_change,
                                       "extendedFileMetadata": True, "partitionValues": old["partitionValues"],
                                       "size": old["size"],
                                       **({"deletionVector": old["deletionVector"]} if "deletionVector" in old
                                          else {})}})
        for p in sorted(wanted):
            if p not in published or _dv_id(published[p]) != _dv_id(wanted[p]):
                actions.append({"add": {**wanted[p], "dataChange": data_change}})
        info["timestamp"] = snap.time_millis
        if snap.commit_kind == CommitKind.COMPACT:
            info.update({"operation": "OPTIMIZE", "operationParameters": {}})
        elif snap.commit_kind == CommitKind.OVERWRITE:
            info["operationParameters"] = {"mode": "Overwrite"}
        elif removes:
            info.update({"operation": "MERGE", "operationParameters": {}})
        info["isBlindAppend"] = not removes and snap.commit_kind == CommitKind.APPEND
    actions.insert(0, {"commitInfo": info})
    payload = "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in actions).encode()
    if not context.io.create_exclusive(_log_path(context, _json_name(version)), payload):
        _cache.clear()
        return None
    new_state = _apply(state, version, actions)
    _cache.clear()
    _cache[(context.paths.root, context.schema.uuid)] = new_state
    if (version > 0 and version % CHECKPOINT_INTERVAL == 0) or state is None and version > 0:
        _write_checkpoint(context, new_state)
    return new_state


def _schema_changed(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    return any(new.get(k) != old.get(k) for k in ("schemaString", "partitionColumns", "id"))


def _protocol_and_metadata(context: "StoreContext", schema: TableSchema, time_ms: int,
                           state: _State | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The protocol and metaData of `schema` (features only grow; `Refused` per invariant 3)."""
    fields = [{"name": f.name, "type": delta_type(context.table_name, f.name, f.type), "nullable": f.nullable,
               "metadata": {}} for f in schema.arrow_schema]
    schema_string = json.dumps({"type": "struct", "fields": fields}, separators=(",", ":"))
    if state is None or schema_string != state.metadata.get("schemaString"):
        _check_history(context, schema)  # only when the columns changed (it lists and reads the schemas)
    features = {"deletionVectors"} | (set(state.protocol.get("readerFeatures", ())) if state else set())
    if any(pa.types.is_timestamp(f.type) and f.type.tz is None for f in schema.arrow_schema):
        features.add("timestampNtz")
    writer = features | (set(state.protocol.get("writerFeatures", ())) if state else set())
    if any(not f.nullable for f in schema.arrow_schema):
        writer.add("invariants")  # a NOT NULL column is a Delta invariant: delta-spark requires the feature listed
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": sorted(features),
                "writerFeatures": sorted(writer)}
    table_id = str(uuid.UUID(schema.uuid)) if schema.uuid else str(uuid.uuid5(uuid.NAMESPACE_URL, context.paths.root))
    metadata = {"id": table_id, "format": {"provider": "parquet", "options": {}},
                "schemaString": schema_string,
                "partitionColumns": list(schema.partition_keys),
                "configuration": {"delta.enableDeletionVectors": "true",
                                  # our checkpoints carry stats as JSON only, no *_parsed columns (PROTOCOL.md)
                                  "delta.checkpoint.writeStatsAsStruct": "false",
                                  "delta.checkpoint.writeStatsAsJson": "true"},
                "createdTime": state.metadata.get("createdTime", time_ms) if state else time_ms}
    return protocol, metadata


def _check_history(context: "StoreContext", schema: TableSchema) -> None:
    """`Refused` unless every column kept its name and type and no name meant two columns (invariant 3)."""
    name_of: dict[int, str] = {}
    type_of: dict[int, pa.DataType] = {}
    owner: dict[str, int] = {}
    ids = [i for i in SchemaManager(context.io, context.paths).schema_ids() if i < schema.id]
    for old in [schema, *(context.schema_of(i) for i in sorted(ids, reverse=True))]:
        for fid, f in zip(old.field_ids, old.arrow_schema):
            if name_of.setdefault(fid, f.name) != f.name:
                raise Refused(f"column {name_of[fid]!r} was renamed from {f.name!r}; the data files name columns by "
                               "their name at write time and the Delta view does not use column mapping")
            if not type_of.setdefault(fid, f.type).equals(f.type):
                raise Refused(f"column {f.name!r} changed type {f.type} -> {type_of[fid]}; Delta readers would "
                               "read the older files under the new type")
            if owner.setdefault(f.name, fid) != fid:
                raise Refused(f"column name {f.name!r} was used by two columns (ids {owner[f.name]} and {fid}); "
                               "Delta readers map the data files' columns by name")


# -- what a snapshot lists ---------------------------------------------------------------------------------------
def _quote(relative: str) -> str:
    """A path relative to the table as the URI Delta's `path` is (readers URL-decode it)."""
    return urllib.parse.quote(relative, safe="/=")


def _publishable(context: "StoreContext", schema: TableSchema, partition: Partition, bucket: int,
                 files: list[DataFileMeta], published: Mapping[str, Any], rel_dir: str) -> bool:
    """Whether a bucket's files, read plainly (minus their vectors), are its rows (invariant 4): for a table without
    a primary key, whether no record retracts (`_VALUE_COUNT` < 1; read once per file not yet published)."""
    plain = plain_bucket(context, schema, files)
    if plain is not None:
        return plain
    for f in files:
        if f"{rel_dir}/{_quote(f.file_name)}" in published:
            continue
        key = (context.paths.root, f.file_name)
        if key not in _min_counts:
            low = pc.min(context.read_file(partition, bucket, f, [COUNT]).column(COUNT)).as_py()
            if len(_min_counts) > 4096:
                _min_counts.clear()
            _min_counts[key] = 1 if low is None else int(low)
        if _min_counts[key] < 1:
            return False
    return True


_min_counts: dict[tuple[str, str], int] = {}


def _target(context: "StoreContext", schema: TableSchema, state: _State | None,
            live: LiveFiles) -> dict[str, dict[str, Any]]:
    """The `add` action of every logical file snapshot `live` lists, by path (invariant 4)."""
    root = context.paths.root
    published = state.adds if state is not None else {}
    by_dir: dict[str, dict[str, Mapping[str, Any]]] = defaultdict(dict)
    for p, a in published.items():
        by_dir[p.rsplit("/", 1)[0]][p] = a
    by_bucket: dict[tuple[Partition, int], list[Any]] = defaultdict(list)
    for key, e in live.entries.items():
        by_bucket[(e.partition, e.bucket)].append(key)
    types = dict(zip(schema.arrow_schema.names, schema.arrow_schema.types))
    columns = set(schema.arrow_schema.names) - set(schema.partition_keys)
    out: dict[str, dict[str, Any]] = {}
    for (partition, bucket), keys in sorted(by_bucket.items()):
        files = [live.file(k) for k in keys]
        rel_dir = _quote(context.paths.bucket_dir(schema.partition_keys, partition, bucket)[len(root) + 1:])
        if not _publishable(context, schema, partition, bucket, files, published, rel_dir):
            out.update({p: dict(a) for p, a in by_dir.get(rel_dir, {}).items()})
            continue
        values = {k: partition_string(context.table_name, k, v, types[k])
                  for k, v in zip(schema.partition_keys, partition)}
        for f in files:
            path = f"{rel_dir}/{_quote(f.file_name)}"
            dv = None if f.deletion_vector is None else dv_descriptor(f.deletion_vector)
            old = published.get(path)
            if old is not None and old.get("deletionVector") == dv:
                out[path] = dict(old)
                continue
            add: dict[str, Any] = {"path": path, "partitionValues": values, "size": f.file_size,
                                   "modificationTime": f.creation_time_ms, "dataChange": True,
                                   "stats": file_stats(f, context.schema_of(f.schema_id).arrow_schema, columns)}
            if dv is not None:
                add["deletionVector"] = dv
            out[path] = add
    return out
