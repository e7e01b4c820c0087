"""Manifest files and manifest lists, Avro via fastavro (on-disk format: field names are fixed).

A manifest lists data files added (`_KIND`=0) or deleted (`_KIND`=1) by one commit. A manifest list names the
manifests of a snapshot. Replaying every entry of a snapshot's manifests in order, keyed by
(partition, bucket, file name), gives the live files: an ADD makes a file live, a DELETE makes it dead.
"""
from __future__ import annotations

import io as _io
import uuid
import zlib
from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

import fastavro

from filestore import manifest_cache
from filestore.errors import CorruptFileError
from filestore.fileio import FileIO
from filestore.meta import ColumnStats, DataFileMeta, DeletionVectorRef, FileKind, ManifestEntry, ManifestFileMeta
from filestore.paths import TablePaths

T = TypeVar("T")
_DECODE_ERRORS = (ValueError, EOFError, StopIteration, zlib.error, KeyError, TypeError, IndexError, OverflowError)

_STATS = {
    "type": "record",
    "name": "ColumnStats",
    "fields": [
        {"name": "_COLUMN", "type": "string"},
        {"name": "_MIN", "type": ["null", "bytes"]},
        {"name": "_MAX", "type": ["null", "bytes"]},
        {"name": "_NULL_COUNT", "type": "long"},
    ],
}
_DATA_FILE = {
    "type": "record",
    "name": "DataFileMeta",
    "fields": [
        {"name": "_FILE_NAME", "type": "string"},
        {"name": "_FILE_SIZE", "type": "long"},
        {"name": "_ROW_COUNT", "type": "long"},
        {"name": "_MIN_KEY", "type": "bytes"},
        {"name": "_MAX_KEY", "type": "bytes"},
        {"name": "_MIN_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_MAX_SEQUENCE_NUMBER", "type": "long"},
        {"name": "_LEVEL", "type": "int"},
        {"name": "_SCHEMA_ID", "type": "long"},
        {"name": "_CREATION_TIME", "type": "long"},
        {"name": "_DELETE_ROW_COUNT", "type": "long"},
        {"name": "_VALUE_STATS", "type": {"type": "array", "items": _STATS}},
    ],
}
MANIFEST_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "ManifestEntry",
        "namespace": "tablestore.filestore",
        "fields": [
            {"name": "_KIND", "type": "int"},
            {"name": "_PARTITION", "type": {"type": "array", "items": "string"}},
            {"name": "_BUCKET", "type": "int"},
            {"name": "_TOTAL_BUCKETS", "type": "int"},
            {"name": "_FILE", "type": _DATA_FILE},
        ],
    }
)
MANIFEST_LIST_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "ManifestFileMeta",
        "namespace": "tablestore.filestore",
        "fields": [
            {"name": "_FILE_NAME", "type": "string"},
            {"name": "_FILE_SIZE", "type": "long"},
            {"name": "_NUM_ADDED_FILES", "type": "long"},
            {"name": "_NUM_DELETED_FILES", "type": "long"},
            {"name": "_SCHEMA_ID", "type": "long"},
        ],
    }
)
DV_INDEX_SCHEMA = fastavro.parse_schema(
    {
        "type": "record",
        "name": "DeletionVectorEntry",
        "namespace": "tablestore.filestore",
        "fields": [
            {"name": "_PARTITION", "type": {"type": "array", "items": "string"}},
            {"name": "_BUCKET", "type": "int"},
            {"name": "_FILE_NAME", "type": "string"},
            {"name": "_DV_PATH", "type": "string"},
            {"name": "_OFFSET", "type": "long"},
            {"name": "_SIZE", "type": "long"},
            {"name": "_CARDINALITY", "type": "long"},
        ],
    }
)
"""A deletion-vector index (filestore.deletion): one record per live data file with deleted rows."""


def _entry_to_avro(e: ManifestEntry) -> dict[str, object]:
    f = e.file
    return {
        "_KIND": int(e.kind),
        "_PARTITION": list(e.partition),
        "_BUCKET": e.bucket,
        "_TOTAL_BUCKETS": e.total_buckets,
        "_FILE": {
            "_FILE_NAME": f.file_name,
            "_FILE_SIZE": f.file_size,
            "_ROW_COUNT": f.row_count,
            "_MIN_KEY": f.min_key,
            "_MAX_KEY": f.max_key,
            "_MIN_SEQUENCE_NUMBER": f.min_sequence_number,
            "_MAX_SEQUENCE_NUMBER": f.max_sequence_number,
            "_LEVEL": f.level,
            "_SCHEMA_ID": f.schema_id,
            "_CREATION_TIME": f.creation_time_ms,
            "_DELETE_ROW_COUNT": f.delete_row_count,
            "_VALUE_STATS": [
                {"_COLUMN": s.column, "_MIN": s.min, "_MAX": s.max, "_NULL_COUNT": s.null_count} for s in f.stats
            ],
        },
    }


def _entry_from_avro(r: dict) -> ManifestEntry:  # type: ignore[type-arg]
    f = r["_FILE"]
    return ManifestEntry(
        kind=FileKind(r["_KIND"]),
        partition=tuple(r["_PARTITION"]),
        bucket=r["_BUCKET"],
        total_buckets=r["_TOTAL_BUCKETS"],
        file=DataFileMeta(
            file_name=f["_FILE_NAME"],
            file_size=f["_FILE_SIZE"],
            row_count=f["_ROW_COUNT"],
            min_key=f["_MIN_KEY"],
            max_key=f["_MAX_KEY"],
            min_sequence_number=f["_MIN_SEQUENCE_NUMBER"],
            max_sequence_number=f["_MAX_SEQUENCE_NUMBER"],
            level=f["_LEVEL"],
            schema_id=f["_SCHEMA_ID"],
            creation_time_ms=f["_CREATION_TIME"],
            delete_row_count=f["_DELETE_ROW_COUNT"],
            stats=tuple(ColumnStats(s["_COLUMN"], s["_MIN"], s["_MAX"], s["_NULL_COUNT"]) for s in f["_VALUE_STATS"]),
        ),
    )


class ManifestIO:
    """Reads and writes a table's manifests and manifest lists."""

    def __init__(self, io: FileIO, paths: TablePaths, table_name: str | None = None) -> None:
        self.io = io
        self.paths = paths
        self.table_name = table_name

    def _write(self, name: str, schema: Any, records: Iterable[dict[str, object]]) -> int:
        buf = _io.BytesIO()
        fastavro.writer(buf, schema, records, codec="deflate")
        data = buf.getvalue()
        self.io.write_bytes(self.paths.manifest_file(name), data)
        return len(data)

    def _read(self, name: str) -> list[dict]:  # type: ignore[type-arg]
        """The records of a manifest or manifest list; CorruptFileError naming it when it is missing or damaged
        (a snapshot names it, so it must be there: only expiration deletes it, after the snapshot)."""
        path = self.paths.manifest_file(name)
        try:
            data = self.io.read_bytes(path)
        except FileNotFoundError:
            raise CorruptFileError(path, "missing, but a snapshot refers to it", self.table_name) from None
        except OSError as e:
            raise CorruptFileError(path, f"unreadable: {e}", self.table_name) from None
        try:
            return list(fastavro.reader(_io.BytesIO(data)))  # type: ignore[arg-type]
        except _DECODE_ERRORS as e:
            raise CorruptFileError(path, f"not an Avro manifest: {type(e).__name__}: {e}", self.table_name) from e

    def _parse(self, name: str, parse: Callable[[dict], T]) -> list[T]:  # type: ignore[type-arg]
        """The parsed records of a manifest or manifest list (from the process's `manifest_cache` when enabled:
        manifests never change once written)."""
        cache = manifest_cache.current()
        path = self.paths.manifest_file(name)
        if cache is not None:
            held = cache.get(path)
            if held is not None:
                return held
        records = self._read(name)
        try:
            parsed = [parse(r) for r in records]
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptFileError(path, f"unexpected record: {type(e).__name__}: {e}", self.table_name) from e
        if cache is not None:
            cache.put(path, parsed)
        return parsed

    def write_manifest(self, entries: Sequence[ManifestEntry], schema_id: int) -> ManifestFileMeta:
        name = self.paths.new_manifest_name()
        size = self._write(name, MANIFEST_SCHEMA, (_entry_to_avro(e) for e in entries))
        added = sum(1 for e in entries if e.kind == FileKind.ADD)
        return ManifestFileMeta(name, size, added, len(entries) - added, schema_id)

    def read_manifest(self, name: str) -> list[ManifestEntry]:
        return self._parse(name, _entry_from_avro)

    def write_manifest_list(self, metas: Sequence[ManifestFileMeta]) -> str:
        name = self.paths.new_manifest_list_name()
        records = (
            {
                "_FILE_NAME": m.file_name,
                "_FILE_SIZE": m.file_size,
                "_NUM_ADDED_FILES": m.num_added_files,
                "_NUM_DELETED_FILES": m.num_deleted_files,
                "_SCHEMA_ID": m.schema_id,
            }
            for m in metas
        )
        self._write(name, MANIFEST_LIST_SCHEMA, records)
        return name

    def read_manifest_list(self, name: str) -> list[ManifestFileMeta]:
        return self._parse(name, lambda r: ManifestFileMeta(
            r["_FILE_NAME"], r["_FILE_SIZE"], r["_NUM_ADDED_FILES"], r["_NUM_DELETED_FILES"], r["_SCHEMA_ID"]
        ))

    def write_dv_index(self, vectors: Mapping[tuple[tuple[str, ...], int, str], DeletionVectorRef]) -> str:
        name = f"dv-index-{uuid.uuid4().hex}.avro"
        records = ({"_PARTITION": list(p), "_BUCKET": b, "_FILE_NAME": n, "_DV_PATH": v.path, "_OFFSET": v.offset,
                    "_SIZE": v.size, "_CARDINALITY": v.cardinality} for (p, b, n), v in sorted(vectors.items()))
        self._write(name, DV_INDEX_SCHEMA, records)
        return name

    def read_dv_index(self, name: str) -> dict[tuple[tuple[str, ...], int, str], DeletionVectorRef]:
        rows = self._parse(name, lambda r: ((tuple(r["_PARTITION"]), r["_BUCKET"], r["_FILE_NAME"]), DeletionVectorRef(
            r["_DV_PATH"], r["_OFFSET"], r["_SIZE"], r["_CARDINALITY"])))
        return dict(rows)


def live_entries(
    entries: Iterable[ManifestEntry],
    base: Mapping[tuple[tuple[str, ...], int, str], ManifestEntry] | None = None,
) -> dict[tuple[tuple[str, ...], int, str], ManifestEntry]:
    """Replay entries in order on `base` (the live files they follow; default: none); what remains are the live
    files, keyed by (partition, bucket, file name). The one replay of ADD and DELETE entries."""
    live: dict[tuple[tuple[str, ...], int, str], ManifestEntry] = dict(base) if base else {}
    for e in entries:
        if e.kind == FileKind.ADD:
            live[e.identifier] = e
        else:
            live.pop(e.identifier, None)
    return live
