"""Deletion vectors: a primary-key table read as a plain scan of its files minus deleted positions, no merge.

On a table with `deletion-vectors.enabled` every snapshot holds, for each live data file with deleted rows, the
positions of those rows (its deletion vector, in the encoding Delta Lake and Iceberg v3 share: filestore.dvformat).
A scan of the snapshot's files minus those positions is exactly the merged table. The rule that keeps it so runs in
the commit (filestore.commit), once per attempt, so every writer (Python or the JVM's tasks) and every compaction
gets it from one place:

    In each bucket a commit adds files to, among all records of each key those added files hold (in the added files
    and in the bucket's other live files), the record of the highest sequence number wins; every other record's
    position is set in its file's vector, and the winner's too when it is a DELETE.

Sequence numbers decide, never the order of commits: a compaction planned on an older snapshot adds its merged
records with their old sequence numbers, and a record written since (a newer one, or a DELETE) still wins over them.
Setting a position twice is harmless, so records already deleted need not be told apart when looking keys up.
Only the `deduplicate` merge engine without a `sequence.field` has this rule (catalog.table_options checks it).

Storage: each commit that sets positions writes one Delta deletion-vector file (`dv/deletion_vector_<uuid>.bin`)
holding the complete vector of every file it changed, and a new index (filestore.manifest: file -> vector) that the
snapshot names; a snapshot that changes no vector names its parent's index. A change read reads files as they were
written (no vector applied): the changes of a snapshot are its added files' records.
"""
from __future__ import annotations

import threading
import uuid
from collections import OrderedDict, defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from filestore import dvformat
from filestore.errors import CorruptFileError, FileStoreError
from filestore.fileio import FileIO
from filestore.keycodec import KeyCodec
from filestore.live import FileKey, LiveFiles
from filestore.manifest import live_entries
from filestore.merge import KIND, SEQ
from filestore.meta import DataFileMeta, DeletionVectorRef, FileKind, ManifestEntry, Partition, ValueKind
from filestore.parallel import pool
from filestore.schema import SYSTEM_COLUMNS

if TYPE_CHECKING:  # the context reads files through this module
    from filestore.context import StoreContext

DV_DIR = "dv"
"""The directory (under the table's) of deletion-vector files; Delta's descriptor names it as its path prefix."""


def deleted_positions(context: "StoreContext", ref: DeletionVectorRef) -> np.ndarray:
    """The sorted row positions one vector deletes (read once per process: vector files never change)."""
    path = f"{context.paths.root}/{ref.path}"
    key = (path, ref.offset)
    with _lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    with context.io.open_input(path) as f:
        f.seek(ref.offset)
        data = f.read(ref.size + 8)  # the size field, the vector and its checksum
    positions = dvformat.read_dv(data, 0, ref.size)
    with _lock:
        _cache[key] = positions
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return positions


_CACHE_SIZE = 4096
_cache: OrderedDict[tuple[str, int], np.ndarray] = OrderedDict()
_lock = threading.Lock()


def read_parquet(io: FileIO, path: str, columns: Sequence[str], filter: pc.Expression | None,
                 positions: np.ndarray) -> pa.Table:
    """Columns `columns` of the rows of a Parquet data file that its vector (`positions`) keeps and `filter` (which
    may name any column of the file) matches, in file order: only the row groups whose statistics may match are
    read, and each row group's slice of the vector applies to it."""
    fs = io.arrow_fs()
    try:
        with fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            meta = parquet.metadata
            counts = np.array([meta.row_group(i).num_rows for i in range(meta.num_row_groups)], dtype=np.int64)
            groups = list(range(meta.num_row_groups))
            if filter is not None and len(groups) > 1:
                fragment = ds.ParquetFileFormat().make_fragment(path, filesystem=fs)
                groups = [g.id for g in fragment.subset(filter).row_groups]
            row_columns = [n for n in parquet.schema_arrow.names if n not in SYSTEM_COLUMNS]  # a filter's
            names = list(columns) if filter is None else list(dict.fromkeys([*columns, *row_columns]))
            table = parquet.read_row_groups(groups, columns=names, use_threads=False)
    except FileNotFoundError:
        raise FileStoreError(f"data file {path} is missing: was it removed by hand or by a bad orphan cleanup?"
                             ) from None
    except (pa.ArrowInvalid, OSError) as e:
        raise CorruptFileError(path, str(e)) from e
    starts = np.concatenate([[0], np.cumsum(counts)])
    keep = np.ones(int(starts[-1]), dtype=bool)
    keep[positions[positions < len(keep)].astype(np.int64)] = False
    if len(groups) != len(counts):
        keep = np.concatenate([keep[starts[g]:starts[g + 1]] for g in groups]) if groups else keep[:0]
    table = table.filter(pa.array(keep))
    return table if filter is None else table.filter(filter).select(list(columns))


def apply(table: pa.Table, positions: np.ndarray) -> pa.Table:
    """`table` (a file's rows in file order) without the rows at `positions`."""
    keep = np.ones(table.num_rows, dtype=bool)
    keep[positions[positions < table.num_rows].astype(np.int64)] = False
    return table.filter(pa.array(keep))


def commit_vectors(
    context: "StoreContext", base: LiveFiles, entries: Sequence[ManifestEntry], written: list[str],
) -> tuple[str | None, dict[FileKey, DeletionVectorRef]]:
    """The deletion-vector index after a commit of `entries` on `base`: (its name, its vectors). New vectors are
    written to one new vector file and the index to a new manifest-directory file (their paths appended to
    `written`, for the commit to delete should it lose the race); an unchanged index keeps its name."""
    live = live_entries(entries, base.entries)
    vectors = {k: v for k, v in base.deletion_vectors.items() if k in live}
    added: dict[tuple[Partition, int], list[DataFileMeta]] = defaultdict(list)
    for e in entries:
        if e.kind == FileKind.ADD:
            added[(e.partition, e.bucket)].append(e.file)
    added_names = {(e.partition, e.bucket, e.file.file_name) for e in entries if e.kind == FileKind.ADD}
    others: dict[tuple[Partition, int], list[DataFileMeta]] = defaultdict(list)
    for key, e in live.items():
        if (key[0], key[1]) in added and key not in added_names:
            others[(key[0], key[1])].append(e.file)
    jobs = [(where, files, others.get(where, [])) for where, files in added.items()]

    def run(job: tuple[tuple[Partition, int], list[DataFileMeta], list[DataFileMeta]]) -> dict[str, np.ndarray]:
        (partition, bucket), new, old = job
        return _bucket_deletions(context, partition, bucket, new, old)

    found = list(pool().map(run, jobs)) if len(jobs) > 1 else [run(j) for j in jobs]
    changed: dict[FileKey, np.ndarray] = {}
    for ((partition, bucket), _, _), deletions in zip(jobs, found):
        for name, positions in deletions.items():
            key = (partition, bucket, name)
            old = vectors.get(key)
            if old is not None:
                union = dvformat.union(deleted_positions(context, old), positions)
                if len(union) == old.cardinality:
                    continue  # nothing new for this file
                positions = union
            changed[key] = positions
    if changed:
        vectors.update(_write_vectors(context, changed, written))
    if not changed and len(vectors) == len(base.deletion_vectors):
        return base.deletion_vector_index, vectors
    if not vectors:
        return None, vectors
    name = context.manifests.write_dv_index(vectors)
    written.append(context.paths.manifest_file(name))
    return name, vectors


def _write_vectors(context: "StoreContext", changed: Mapping[FileKey, np.ndarray],
                   written: list[str]) -> dict[FileKey, DeletionVectorRef]:
    keys = sorted(changed)
    data, spans = dvformat.encode_dv_file([dvformat.encode_positions(changed[k]) for k in keys])
    relative = f"{DV_DIR}/{dvformat.dv_file_name(uuid.uuid4())}"
    path = f"{context.paths.root}/{relative}"
    context.io.write_bytes(path, data)
    written.append(path)
    return {k: DeletionVectorRef(relative, offset, size, len(changed[k])) for k, (offset, size) in zip(keys, spans)}


def _bucket_deletions(context: "StoreContext", partition: Partition, bucket: int, new: Sequence[DataFileMeta],
                      old: Sequence[DataFileMeta]) -> dict[str, np.ndarray]:
    """Per file name, the positions the rule (module docstring) deletes in one bucket."""
    lo, hi = min(f.min_key for f in new), max(f.max_key for f in new)
    candidates = [f for f in old if not (f.max_key < lo or f.min_key > hi)]
    if len(new) == 1 and all(f.max_sequence_number < new[0].min_sequence_number for f in candidates):
        return _append_deletions(context, partition, bucket, new[0], candidates)
    files = [*new, *candidates]
    key_columns = list(context.schema.key_columns)
    tables = [_read(context, partition, bucket, f, [*key_columns, SEQ] + [KIND] * (
        i < len(new) or bool(f.delete_row_count))) for i, f in enumerate(files)]
    keys = [_keys(t, key_columns) for t in tables]
    new_keys = pa.chunked_array(keys[: len(new)]).combine_chunks() if len(new) > 1 else keys[0]
    parts_file, parts_pos, parts_key, parts_seq, parts_kind = [], [], [], [], []
    for i, (t, k) in enumerate(zip(tables, keys)):
        if i < len(new):
            positions = np.arange(t.num_rows, dtype=np.int64)
        else:
            positions = _matches(k, new_keys)
            if not len(positions):
                continue
        idx = pa.array(positions)
        parts_file.append(np.full(len(positions), i, dtype=np.int32))
        parts_pos.append(positions)
        parts_key.append(k.take(idx))
        parts_seq.append(t.column(SEQ).combine_chunks().take(idx).to_numpy())
        kinds = t.column(KIND).combine_chunks().take(idx).to_numpy() if KIND in t.column_names else None
        parts_kind.append(np.zeros(len(positions), np.int8) if kinds is None else kinds)
    records = pa.table({"k": pa.chunked_array(parts_key), "s": np.concatenate(parts_seq)})
    order = pc.sort_indices(records, [("k", "ascending"), ("s", "descending")]).to_numpy()
    sorted_keys = records.column("k").combine_chunks().take(pa.array(order))
    first = np.ones(len(order), dtype=bool)
    if len(order) > 1:
        first[1:] = pc.not_equal(sorted_keys[1:], sorted_keys[:-1]).to_numpy(zero_copy_only=False)
    kinds = np.concatenate(parts_kind)[order]
    deleted = ~first | (kinds == int(ValueKind.DELETE))
    file_of = np.concatenate(parts_file)[order][deleted]
    pos_of = np.concatenate(parts_pos)[order][deleted]
    out: dict[str, np.ndarray] = {}
    for i in np.unique(file_of):
        out[files[int(i)].file_name] = np.sort(pos_of[file_of == i]).astype(np.uint64)
    return out


def _append_deletions(context: "StoreContext", partition: Partition, bucket: int, new: DataFileMeta,
                      candidates: Sequence[DataFileMeta]) -> dict[str, np.ndarray]:
    """The rule for the usual commit: one new file (one sorted run: each key once) whose records are all newer than
    the bucket's other files. Every older record of its keys is deleted, and its own DELETE records; no sequence
    number need be read or compared."""
    key_columns = list(context.schema.key_columns)
    table = _read(context, partition, bucket, new, [*key_columns] + [KIND] * bool(new.delete_row_count))
    new_keys = _keys(table, key_columns)
    out: dict[str, np.ndarray] = {}
    if new.delete_row_count:
        own = np.flatnonzero(table.column(KIND).to_numpy() == int(ValueKind.DELETE))
        if len(own):
            out[new.file_name] = own.astype(np.uint64)
    for f in candidates:
        positions = _matches(_keys(_read(context, partition, bucket, f, key_columns), key_columns), new_keys)
        if len(positions):
            out[f.file_name] = positions.astype(np.uint64)
    return out


def _read(context: "StoreContext", partition: Partition, bucket: int, file: DataFileMeta,
          columns: Sequence[str]) -> pa.Table:
    """A file's records as written (no vector applied: positions are the file's own)."""
    return context.read_file(partition, bucket, replace(file, deletion_vector=None), columns)


def _matches(keys: pa.Array, value_set: pa.Array) -> np.ndarray:
    """The positions of `keys` that are among `value_set`."""
    return np.flatnonzero(pc.is_in(keys, value_set=value_set).to_numpy(zero_copy_only=False))


def _keys(table: pa.Table, key_columns: Sequence[str]) -> pa.Array:
    """One comparable array of a file's keys: the key column itself for one key (not a float: NaN equals NaN as a
    key), else the keys' encoded bytes (filestore.keycodec: equal keys, equal bytes)."""
    if len(key_columns) == 1 and not pa.types.is_floating(table.schema.field(key_columns[0]).type):
        return table.column(key_columns[0]).combine_chunks()
    codec = KeyCodec([table.schema.field(k).type for k in key_columns])
    return codec.encode_columns([table.column(k) for k in key_columns])
