"""Metadata values of the file store: immutable, primitive fields only (they pickle for Spark workers).

On-disk enums: `ValueKind` is stored in every data file's `_VALUE_KIND` column, `FileKind` in every manifest
entry, `CommitKind` in every snapshot. Their numbers and names never change.
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field, replace

from filestore.errors import CorruptFileError


class ValueKind(enum.IntEnum):
    """On-disk: the `_VALUE_KIND` column of a data file."""

    ADD = 0
    DELETE = 1


class FileKind(enum.IntEnum):
    """On-disk: `_KIND` of a manifest entry."""

    ADD = 0
    DELETE = 1


class CommitKind(str, enum.Enum):
    """On-disk: `commitKind` of a snapshot."""

    APPEND = "APPEND"
    COMPACT = "COMPACT"
    OVERWRITE = "OVERWRITE"


@dataclass(frozen=True)
class ColumnStats:
    """Min/max of one column as order-preserving key bytes (filestore.keycodec), None when all null or unknown."""

    column: str
    min: bytes | None
    max: bytes | None
    null_count: int


@dataclass(frozen=True)
class DeletionVectorRef:
    """Where one data file's deletion vector is (filestore.deletion): `path` relative to the table directory (a
    Delta deletion-vector file, filestore.dvformat), the vector at byte `offset` (Delta's meaning) of `size` bytes,
    `cardinality` rows deleted."""

    path: str
    offset: int
    size: int
    cardinality: int


@dataclass(frozen=True)
class DataFileMeta:
    file_name: str
    file_size: int
    row_count: int
    min_key: bytes
    max_key: bytes
    min_sequence_number: int
    max_sequence_number: int
    level: int
    schema_id: int
    creation_time_ms: int
    delete_row_count: int = 0
    stats: tuple[ColumnStats, ...] = ()
    deletion_vector: DeletionVectorRef | None = None
    """The rows of this file deleted as of the snapshot a read plans on (attached by LiveFiles; never stored in a
    manifest: the snapshot's deletion-vector index holds it). None: no row deleted, or a read of the file as it was
    written (a change read)."""

    def upgrade(self, level: int) -> "DataFileMeta":
        return replace(self, level=level)


Partition = tuple[str, ...]
"""A partition as its Hive-rendered values, in partition-key order (see filestore.paths)."""


@dataclass(frozen=True)
class ManifestEntry:
    kind: FileKind
    partition: Partition
    bucket: int
    total_buckets: int
    file: DataFileMeta

    @property
    def identifier(self) -> tuple[Partition, int, str]:
        return (self.partition, self.bucket, self.file.file_name)


@dataclass(frozen=True)
class ManifestFileMeta:
    file_name: str
    file_size: int
    num_added_files: int
    num_deleted_files: int
    schema_id: int


@dataclass(frozen=True)
class CommitMessage:
    """What a writer hands the committer for one partition and bucket (prepare-commit's output)."""

    partition: Partition
    bucket: int
    total_buckets: int
    added: tuple[DataFileMeta, ...] = ()
    deleted: tuple[DataFileMeta, ...] = ()

    @property
    def is_empty(self) -> bool:
        return not self.added and not self.deleted


@dataclass(frozen=True)
class Snapshot:
    """One version of the table (on-disk JSON `snapshot/snapshot-<id>`)."""

    id: int
    schema_id: int
    base_manifest_list: str
    delta_manifest_list: str
    commit_user: str
    commit_identifier: int
    commit_kind: CommitKind
    time_millis: int
    total_record_count: int
    delta_record_count: int
    log_offsets: dict[int, int] = field(default_factory=dict)
    version: int = 1
    log_pending: tuple[int, ...] = ()
    """Snapshots (this one or earlier) whose changes are not in the log yet: their log is produced after the
    snapshot by the executors (tablestore.log_publish) and recorded by a log-only snapshot, which takes the id out
    of this list. A reader that hands over from a scan to the log starts before the first of them."""
    deletion_vectors: str | None = None
    """The deletion-vector index of this snapshot (a file in the manifest directory, filestore.deletion), on tables
    with `deletion-vectors.enabled`; None: no file of the table has a deleted row."""
    commit_duration_ms: int | None = None
    """How long its commit took, from the writer's call to the snapshot's time (manifests written, conflicts
    checked, retries after another writer took the id included; the snapshot file's own write is not): what
    `tablestore service`'s `/metrics` shows as commit latency. None: a snapshot written before it was recorded."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "version": self.version,
                "id": self.id,
                "schemaId": self.schema_id,
                "baseManifestList": self.base_manifest_list,
                "deltaManifestList": self.delta_manifest_list,
                "commitUser": self.commit_user,
                "commitIdentifier": self.commit_identifier,
                "commitKind": self.commit_kind.value,
                "timeMillis": self.time_millis,
                "totalRecordCount": self.total_record_count,
                "deltaRecordCount": self.delta_record_count,
                "logOffsets": {str(k): v for k, v in sorted(self.log_offsets.items())},
                **({"logPending": list(self.log_pending)} if self.log_pending else {}),
                **({"deletionVectors": self.deletion_vectors} if self.deletion_vectors else {}),
                **({"commitDurationMillis": self.commit_duration_ms} if self.commit_duration_ms is not None
                   else {}),
            },
            indent=2,
        )

    @staticmethod
    def from_json(text: str, path: str = "<snapshot>") -> "Snapshot":
        try:
            d = json.loads(text)
            return Snapshot(
                id=int(d["id"]),
                schema_id=int(d["schemaId"]),
                base_manifest_list=d["baseManifestList"],
                delta_manifest_list=d["deltaManifestList"],
                commit_user=d["commitUser"],
                commit_identifier=int(d["commitIdentifier"]),
                commit_kind=CommitKind(d["commitKind"]),
                time_millis=int(d["timeMillis"]),
                total_record_count=int(d["totalRecordCount"]),
                delta_record_count=int(d["deltaRecordCount"]),
                log_offsets={int(k): int(v) for k, v in d.get("logOffsets", {}).items()},
                version=int(d.get("version", 1)),
                log_pending=tuple(int(i) for i in d.get("logPending", ())),
                deletion_vectors=d.get("deletionVectors"),
                commit_duration_ms=None if d.get("commitDurationMillis") is None else int(d["commitDurationMillis"]),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise CorruptFileError(path, f"not a snapshot: {e}") from e
