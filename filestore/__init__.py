"""The file store: an LSM tree of data files per partition and bucket, versioned by snapshots and manifests."""
from filestore.errors import (
    CommitConflictError,
    CommitRetriesExhaustedError,
    CorruptFileError,
    FileStoreError,
    InvalidWriteError,
    SchemaMismatchError,
    SequenceConflictError,
    SnapshotNotFoundError,
)
from filestore.meta import CommitKind, CommitMessage, DataFileMeta, Snapshot, ValueKind
from filestore.options import FileStoreOptions
from filestore.schema import TableSchema
from filestore.store import FileStore

__all__ = [
    "CommitConflictError",
    "CommitKind",
    "CommitMessage",
    "CommitRetriesExhaustedError",
    "CorruptFileError",
    "DataFileMeta",
    "FileStore",
    "FileStoreError",
    "FileStoreOptions",
    "InvalidWriteError",
    "SchemaMismatchError",
    "SequenceConflictError",
    "Snapshot",
    "SnapshotNotFoundError",
    "TableSchema",
    "ValueKind",
]
