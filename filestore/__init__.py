"""The file store: an LSM tree of data files per partition and bucket, versioned by snapshots and manifests.

What other packages may use is listed in `__all__`; they import it from here, never from a submodule."""
from filestore.adopt import adopt_data_file
from filestore.bucket import bucket_of
from filestore.coerce import conform_column, normalize_keys
from filestore.commit import CommitResult, FileStoreCommit, Overwrite
from filestore.compact import added_by, compact, delete_added_files, plan_compaction, sorted_run_counts
from filestore.compact_pick import sorted_runs
from filestore.context import StoreContext
from filestore.errors import (
    BucketMismatchError,
    CommitConflictError,
    CommitRetriesExhaustedError,
    ConcurrentUpdateError,
    ConditionalWriteUnsupportedError,
    CorruptFileError,
    FileStoreError,
    InvalidWriteError,
    KeyCodecError,
    RetractionNotSupportedError,
    SchemaMismatchError,
    SequenceConflictError,
    SnapshotNotFoundError,
    TableDroppedError,
)
from filestore.datafile import read_data_file
from filestore.evolution import widens
from filestore.expire import ExpireResult, expire_snapshots, remove_orphan_files
from filestore.fileio import FileIO
from filestore.objectstore import S3Settings, check_conditional_writes, is_s3
from filestore.keycodec import KeyCodec
from filestore.merge_engine import (AGGREGATE_FUNCTIONS, DEFAULT_AGGREGATE, ENGINES, ORDER_FREE, RETRACTING,
                                    EngineName, MergeEngine, unsuitable_type)
from filestore.live import LiveFiles
from filestore.manifest_cache import ManifestCache
from filestore.manifest_cache import disable as disable_manifest_cache
from filestore.manifest_cache import enable as enable_manifest_cache
from filestore.parallel import pool
from filestore.meta import CommitKind, CommitMessage, DataFileMeta, ManifestEntry, Partition, Snapshot, ValueKind
from filestore.options import FileStoreOptions
from filestore.paths import TablePaths
from filestore.retry import RetryBudget
from filestore.scan import Split
from filestore.schema import SYSTEM_COLUMNS, SchemaManager, TableSchema
from filestore.store import FileStore
from filestore.partition import partition_value, render_partition_column
from filestore.paths import DEFAULT_PARTITION
from filestore.write import FileStoreWrite
from filestore.views.delta import delta_version

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "BucketMismatchError",
    "CommitConflictError",
    "CommitKind",
    "CommitMessage",
    "CommitResult",
    "CommitRetriesExhaustedError",
    "ConcurrentUpdateError",
    "ConditionalWriteUnsupportedError",
    "CorruptFileError",
    "DEFAULT_AGGREGATE",
    "DEFAULT_PARTITION",
    "DataFileMeta",
    "ENGINES",
    "EngineName",
    "ExpireResult",
    "FileIO",
    "FileStore",
    "FileStoreCommit",
    "FileStoreError",
    "FileStoreOptions",
    "FileStoreWrite",
    "InvalidWriteError",
    "KeyCodec",
    "KeyCodecError",
    "LiveFiles",
    "ManifestCache",
    "ManifestEntry",
    "MergeEngine",
    "ORDER_FREE",
    "Overwrite",
    "Partition",
    "RETRACTING",
    "RetractionNotSupportedError",
    "RetryBudget",
    "S3Settings",
    "SYSTEM_COLUMNS",
    "SchemaManager",
    "SchemaMismatchError",
    "SequenceConflictError",
    "Snapshot",
    "SnapshotNotFoundError",
    "Split",
    "StoreContext",
    "TableDroppedError",
    "TablePaths",
    "TableSchema",
    "ValueKind",
    "added_by",
    "adopt_data_file",
    "bucket_of",
    "check_conditional_writes",
    "compact",
    "conform_column",
    "delete_added_files",
    "delta_version",
    "disable_manifest_cache",
    "enable_manifest_cache",
    "expire_snapshots",
    "is_s3",
    "normalize_keys",
    "partition_value",
    "plan_compaction",
    "pool",
    "read_data_file",
    "remove_orphan_files",
    "render_partition_column",
    "sorted_run_counts",
    "sorted_runs",
    "unsuitable_type",
    "widens",
]
