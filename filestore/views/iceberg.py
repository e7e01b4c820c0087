"""The Iceberg view (`metadata.iceberg.storage` = `table-location`): every snapshot of the table also published as
a snapshot of an Iceberg table (format version 3) under `<table>/metadata/`, as Paimon's Iceberg compatibility does,
so that pyiceberg and other Iceberg readers read the table's own data files in place.

Layout (all written once, never changed; `version-hint.text` is only a hint):
    metadata/v<N>.metadata.json        the Iceberg table metadata; N = the tablestore snapshot it publishes
    metadata/version-hint.text         N of the latest one (readers that find tables by hint)
    metadata/snap-<N>-<uuid>.avro      manifest list of Iceberg snapshot N
    metadata/<uuid>-m0.avro            manifests (data or deletes), reused by later snapshots while all their files are
    metadata/dv-<N>-<uuid>.puffin      deletion vectors (Puffin `deletion-vector-v1` blobs) set by snapshot N

Invariants:
1. Iceberg snapshot id == tablestore snapshot id == the N of its metadata file; its sequence number is N too (so
   sequence numbers increase with snapshots). Its parent is the previously published snapshot. Snapshots are
   published in order; a commit publishes every snapshot not published yet (catch-up after a failure or a crash),
   skipping expired ones (straight from the last published state to the next retained one). A metadata file is
   created exclusively: of two racing publishers one wins, the other deletes what it wrote for that version and
   goes on from the winner's.
2. Iceberg column ids are the table's column ids (`TableSchema.field_ids`); one Iceberg schema per table schema
   (same id); an identity partition spec on the partition columns (partition field ids 1000, 1001, ...). Data files
   carry no Parquet field ids and extra system columns: the table property `schema.name-mapping.default` maps
   every name a column has had (renames and dropped columns included) to its id, and the system columns to ids no
   schema has (SYSTEM_FIELD_IDS), so readers map columns by name and skip the system ones. A
   name used by two ids over the table's history, or a type change that is not one of Iceberg's promotions, stops
   publishing (logged as an error; the commit is unaffected).
3. What a snapshot lists reads as the table (never a key twice, never a deleted key), or, in a bucket that lags
   (below), as that bucket was at an earlier snapshot:
   - deletion vectors (`deletion-vectors.enabled`): every live file, and for each file with deleted rows its
     vector as an Iceberg v3 deletion vector (a Puffin blob; `referenced_data_file`, `content_offset`,
     `content_size_in_bytes`, and `file_path` bounds). pyiceberg 0.12 and DuckDB's iceberg extension read these,
     so v3 is used, not v2 position-delete files. A blob is written only for a file whose vector changed since the
     last publish (vectors only grow, so a changed cardinality is a changed vector); unchanged ones keep their
     entry. One Puffin file holds the blobs one snapshot writes; a blob superseded later may stay in a Puffin file
     still listed for another blob, and is then a subset of its file's current vector, so a reader that applies
     every blob of a Puffin file (pyiceberg does) still reads exactly.
   - a primary-key table without deletion vectors: a bucket is published only when its files are one sorted run
     without DELETE records (fully compacted); otherwise the bucket's previously published files stay listed, so
     the view lags in that bucket until compaction. Expiry and orphan removal keep every data file the latest
     metadata lists (`listed_files`; filestore.expire), so a lagging bucket's files stay readable after a
     compaction has replaced them in the table.
   - a table without a primary key: the same, a bucket being publishable when it has no DELETE records and every
     record counts one row (`_VALUE_COUNT` == 1, read once per newly published file). A row written twice in one
     write is one record counting two: Iceberg cannot say so, and its bucket lags until that record is gone.
4. A snapshot's metadata lists only the snapshots whose tablestore snapshot still exists: expired ones are dropped,
   and the metadata-directory files only they used deleted (never a data file: the table's expiry owns those).
   Any other file of the metadata directory (a crashed publisher's) is an orphan (`metadata_files`).
"""
from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING, Any, Mapping

import pyarrow.compute as pc

from filestore import deletion, dvformat
from filestore.errors import SnapshotNotFoundError
from filestore.live import LiveFiles
from filestore.merge_keys import COUNT
from filestore.meta import CommitKind, DataFileMeta, Partition
from filestore.partition import partition_value
from filestore.schema import SYSTEM_COLUMNS, SchemaManager, TableSchema
from filestore.views import plain_bucket
from filestore.views import iceberg_avro as ia
from filestore.views.iceberg_state import (METADATA_DIR, VERSION_HINT, Manifest, Published, io_path, latest_version,
                                           load, metadata_file, remember, root_uri, version_of)

if TYPE_CHECKING:
    from filestore.context import StoreContext

NAME = "Iceberg"
MAX_REUSED_MANIFESTS = 32
"""More manifests of one content than this and the next snapshot rewrites them into one."""
SYSTEM_FIELD_IDS = {name: 2**30 - 1 + i for i, name in enumerate(SYSTEM_COLUMNS)}
"""Name-mapping ids of the data files' system columns: no table column has them (ids count up from 0) and no
schema lists them, so readers skip those columns; clear of Iceberg's reserved ids (near 2**31)."""
log = logging.getLogger(__name__)


class _Refused(Exception):
    """The table's history cannot be published as Iceberg (logged as an error; publishing stops)."""


def publish(context: "StoreContext", live: LiveFiles) -> None:
    """Publish every snapshot up to `live`'s that the view lacks, in order (module docstring, invariant 1)."""
    if live.snapshot is None:
        return
    latest = latest_version(context)
    if latest is not None and latest >= live.snapshot.id:
        return
    state = load(context, latest)
    first = max((latest or 0) + 1, context.snapshots.earliest_id() or live.snapshot.id)
    for sid in range(first, live.snapshot.id + 1):
        if sid == live.snapshot.id:
            target = live
        else:
            try:
                target = context.live_files(context.snapshots.get(sid))
            except SnapshotNotFoundError:
                continue  # expired: publish straight to the next retained one
        try:
            published = _publish_snapshot(context, state, target)
        except (_Refused, ia.UnsupportedTypeError) as e:
            log.error("table %s: the Iceberg view stops at snapshot %s: %s", context.table_name, state.version, e)
            return
        # None: another publisher created this version first; go on from its state
        state = published if published is not None else load(context, sid)


def _publishable(context: "StoreContext", schema: TableSchema, partition: Partition, bucket: int,
                 files: list[DataFileMeta], known: Mapping[str, ia.Entry], dir_uri: str) -> bool:
    """Whether a bucket's files, read plainly, are exactly its rows (module docstring, invariant 3)."""
    plain = plain_bucket(context, schema, files)
    if plain is not None:
        return plain
    for f in files:
        if f"{dir_uri}/{f.file_name}" in known:
            continue
        counts = context.read_file(partition, bucket, f, [COUNT]).column(COUNT)
        bounds = pc.min_max(counts).as_py()
        if len(counts) and (bounds["min"] != 1 or bounds["max"] != 1):
            return False
    return True


def _name_mapping(context: "StoreContext", schema: TableSchema) -> list[dict[str, Any]]:
    """ia.name_mapping of `schema` and every schema before it; _Refused when one name meant two columns."""
    ids = [i for i in SchemaManager(context.io, context.paths).schema_ids() if i < schema.id]
    mapping = ia.name_mapping([schema, *(context.schema_of(i) for i in sorted(ids, reverse=True))], SYSTEM_FIELD_IDS)
    if isinstance(mapping, str):
        raise _Refused(mapping)
    return mapping


def _publish_snapshot(context: "StoreContext", state: Published, live: LiveFiles) -> Published | None:
    """Publish `live` on top of `state`: the new state, or None when another publisher created the version. The
    files it wrote are deleted when it fails or loses (a crash leaves them, unreferenced, for orphan removal:
    `metadata_files`)."""
    written: list[str] = []
    try:
        published = _write_snapshot(context, state, live, written)
    except BaseException:
        _delete(context, written)
        raise
    if published is None:
        _delete(context, written)
    return published


def _delete(context: "StoreContext", paths: list[str]) -> None:
    for path in paths:
        try:
            context.io.delete(path)
        except OSError as e:
            log.warning("table %s: could not delete the unused Iceberg file %s: %s", context.table_name, path, e)


def _write_snapshot(context: "StoreContext", state: Published, live: LiveFiles,
                    written: list[str]) -> Published | None:
    """`_publish_snapshot`'s work; every file it writes is appended to `written` before the metadata file."""
    assert live.snapshot is not None
    snap = live.snapshot
    schema = context.schema_of(snap.schema_id)
    ischema = ia.iceberg_schema(schema)
    schemas = [s for s in state.metadata.get("schemas", []) if s["schema-id"] != schema.id] + [ischema]
    previous_current = next((s for s in state.metadata.get("schemas", [])
                             if s["schema-id"] == state.metadata.get("current-schema-id")), None)
    refused = ia.unpromotable(previous_current, ischema)
    if refused:
        raise _Refused(refused)
    mapping = _name_mapping(context, schema)
    root, base_uri, io = context.paths.root, root_uri(context), context.io
    types = dict(zip(schema.arrow_schema.names, schema.arrow_schema.types))
    spec_fields = [(k, ia.PARTITION_FIELD_BASE + i, ia.iceberg_type(types[k])) for i, k in
                   enumerate(schema.partition_keys)]
    seq = snap.id
    next_row_id = int(state.metadata.get("next-row-id", 0))

    # the data files and deletion vectors this snapshot lists
    by_bucket: dict[tuple[Partition, int], list[Any]] = {}
    for key, e in live.entries.items():
        by_bucket.setdefault((e.partition, e.bucket), []).append((key, e.file))
    published_by_dir: dict[str, list[ia.Entry]] = {}
    for listed in state.data.values():
        published_by_dir.setdefault(listed.path.rsplit("/", 1)[0], []).append(listed)
    data: dict[str, ia.Entry] = {}
    wanted_dvs: dict[str, tuple[Any, tuple[Any, ...]]] = {}
    for (partition, bucket), files in sorted(by_bucket.items()):
        dir_uri = base_uri + context.paths.bucket_dir(schema.partition_keys, partition, bucket)[len(root):]
        if not _publishable(context, schema, partition, bucket, [f for _, f in files], state.data, dir_uri):
            data.update({x.path: x for x in published_by_dir.get(dir_uri, [])})  # the bucket lags
            continue
        values = tuple(partition_value(v, types[k]).as_py() for k, v in zip(schema.partition_keys, partition))
        for key, f in files:
            path = f"{dir_uri}/{f.file_name}"
            entry = state.data.get(path)
            if entry is None:
                entry = ia.Entry(path, values, f.row_count, f.file_size, snap.id, seq, next_row_id)
                next_row_id += f.row_count
            data[path] = entry
            ref = live.deletion_vectors.get(key)
            if ref is not None:
                wanted_dvs[path] = (ref, values)
    deletes: dict[str, ia.Entry] = {}
    changed: dict[str, tuple[Any, tuple[Any, ...]]] = {}
    for path, (ref, values) in wanted_dvs.items():
        old = state.deletes.get(path)
        if old is not None and old.record_count == ref.cardinality:
            deletes[path] = old
        else:
            changed[path] = (ref, values)
    if changed:
        paths = sorted(changed)
        blobs = [(dvformat.iceberg_dv_blob(deletion.deleted_positions(context, changed[p][0])),
                  {"referenced-data-file": p, "cardinality": changed[p][0].cardinality}) for p in paths]
        puffin, ranges = dvformat.write_puffin(blobs)
        name = f"{METADATA_DIR}/dv-{snap.id}-{uuid.uuid4().hex}.puffin"
        io.write_bytes(f"{root}/{name}", puffin)
        written.append(f"{root}/{name}")
        for p, (offset, length) in zip(paths, ranges):
            deletes[p] = ia.Entry(f"{base_uri}/{name}", changed[p][1], changed[p][0].cardinality, len(puffin),
                                snap.id, seq, None, p, offset, length)

    # manifests: reuse those whose entries are all still listed, write the rest
    kv = {"schema": json.dumps(ischema), "schema-id": str(schema.id), "partition-spec-id": "0",
          "partition-spec": json.dumps([{"name": n, "transform": "identity", "source-id": schema.field_id(n),
                                         "field-id": fid} for n, fid, _ in spec_fields]), "format-version": "3"}
    avro_schema = ia.manifest_schema(spec_fields)
    manifests: list[Manifest] = []
    for content, wanted, before in ((0, data, state.data), (1, deletes, state.deletes)):
        reused = [m for m in state.manifests if m.row["content"] == content
                  and all(before.get(k) is wanted.get(k) for k in m.keys)]
        if len(reused) > MAX_REUSED_MANIFESTS:
            reused = []
        covered = {k for m in reused for k in m.keys}
        rest = [e for k, e in sorted(wanted.items()) if k not in covered]
        manifests += reused
        if rest:
            name = f"{METADATA_DIR}/{uuid.uuid4().hex}-m0.avro"
            payload, row = ia.manifest(rest, snap.id, seq, content, avro_schema,
                                       {**kv, "content": "data" if content == 0 else "deletes"},
                                       [n for n, *_ in spec_fields], context.options.file_format,
                                       f"{base_uri}/{name}")
            io.write_bytes(f"{root}/{name}", payload)
            written.append(f"{root}/{name}")
            manifests.append(Manifest(row, tuple(e.referenced or e.path for e in rest)))
    first_row_id = int(state.metadata.get("next-row-id", 0))
    list_name = f"{METADATA_DIR}/snap-{snap.id}-{uuid.uuid4().hex}.avro"
    parent = state.version
    io.write_bytes(f"{root}/{list_name}", ia.write_avro(ia.MANIFEST_LIST_SCHEMA, [m.row for m in manifests], {
        "snapshot-id": str(snap.id), "parent-snapshot-id": str(parent) if parent is not None else "null",
        "sequence-number": str(seq), "format-version": "3", "first-row-id": str(first_row_id)}))
    written.append(f"{root}/{list_name}")

    # the table metadata
    removed = any(p not in data for p in state.data)
    if snap.commit_kind == CommitKind.COMPACT:
        operation = "replace"
    else:
        operation = "overwrite" if removed or changed else "append"
    iceberg_snapshot = {
        "snapshot-id": snap.id, **({"parent-snapshot-id": parent} if parent is not None else {}),
        "sequence-number": seq, "timestamp-ms": snap.time_millis, "manifest-list": f"{base_uri}/{list_name}",
        "schema-id": schema.id, "first-row-id": first_row_id, "added-rows": next_row_id - first_row_id,
        "summary": {"operation": operation, "total-data-files": str(len(data)),
                    "total-delete-files": str(len(deletes)),
                    "total-records": str(sum(e.record_count for e in data.values())),
                    "total-position-deletes": str(sum(e.record_count for e in deletes.values()))}}
    earliest = context.snapshots.earliest_id() or snap.id  # expiry removes from the front: ids >= it exist
    retained = [s for s in state.metadata.get("snapshots", []) if s["snapshot-id"] >= earliest]
    dropped = [s for s in state.metadata.get("snapshots", []) if s["snapshot-id"] < earliest]
    metadata = ia.table_metadata(
        state.metadata, iceberg_snapshot, retained, schema, schemas, json.loads(kv["partition-spec"]), base_uri,
        {"schema.name-mapping.default": json.dumps(mapping), "tablestore.table": context.table_name}, next_row_id,
        None if state.version is None else f"{base_uri}/{METADATA_DIR}/v{state.version}.metadata.json")
    target = metadata_file(context, snap.id)
    if not io.create_exclusive(target, json.dumps(metadata, indent=2).encode()):
        return None
    try:
        io.replace_hint(f"{root}/{METADATA_DIR}/{VERSION_HINT}", str(snap.id).encode())
    except OSError as e:  # a hint only: readers and the next publish list the directory
        log.warning("table %s: could not update the Iceberg version hint: %s", context.table_name, e)
    if dropped:
        try:
            _delete_dropped(context, dropped, retained, [f"{root}/{list_name}", *(io_path(context, m.row[
                "manifest_path"]) for m in manifests), *(io_path(context, e.path) for e in deletes.values())])
        except OSError as e:  # the view is published; what is left is only unreferenced
            log.warning("table %s: could not delete the expired Iceberg snapshots' files: %s", context.table_name, e)
    return remember(context, Published(snap.id, metadata, data, deletes, tuple(manifests)))


def listed_files(context: "StoreContext") -> set[str]:
    """The table's data files the latest metadata's current snapshot lists (paths as the table's file IO names
    them; its deletion vectors are Puffin files of the metadata directory, see `metadata_files`)."""
    state = load(context, latest_version(context))
    return {io_path(context, path) for path in state.data}


def metadata_files(context: "StoreContext") -> set[str]:
    """Every metadata-directory file the view needs: the metadata files, the version hint, and what each snapshot
    the latest metadata lists needs (its manifest list, manifests and Puffin files). Anything else there is left
    by a publisher that crashed or lost a race before it could delete it."""
    directory = f"{context.paths.root}/{METADATA_DIR}"
    needed = {f"{directory}/{VERSION_HINT}"}
    needed |= {s.path for s in context.io.list_dir(directory) if version_of(s.path.rsplit("/", 1)[-1]) is not None}
    state = load(context, latest_version(context))
    for snapshot in state.metadata.get("snapshots", []):
        needed |= _snapshot_files(context, snapshot)
    return needed


def _snapshot_files(context: "StoreContext", snapshot: Mapping[str, Any]) -> set[str]:
    """The metadata-directory files an Iceberg snapshot needs: its manifest list, manifests and Puffin files."""
    listed = io_path(context, snapshot["manifest-list"])
    found = {listed}
    for row in ia.read_avro(context.io.read_bytes(listed)):
        found.add(io_path(context, row["manifest_path"]))
        if row["content"] == 1:
            found |= {io_path(context, e["data_file"]["file_path"])
                      for e in ia.read_avro(context.io.read_bytes(io_path(context, row["manifest_path"])))}
    return found


def _delete_dropped(context: "StoreContext", dropped: list[Mapping[str, Any]], retained: list[Mapping[str, Any]],
                    current: list[str]) -> None:
    """Delete the files and metadata files of the Iceberg snapshots dropped (their tablestore snapshots expired)
    that no retained snapshot, nor the one just published (`current`), needs. Never a data file: those are the
    table's, which its own expiry deletes."""
    doomed: set[str] = set()
    for s in dropped:
        doomed |= _snapshot_files(context, s)
        doomed.add(metadata_file(context, s["snapshot-id"]))
    doomed -= set(current)
    for s in retained:
        doomed -= _snapshot_files(context, s)
    for path in sorted(doomed):
        context.io.delete(path)


