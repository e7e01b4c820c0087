"""The file store: an LSM tree of data files per partition and bucket, versioned by snapshots and manifests.

What other packages may use is listed in `__all__`; they import it from here, never from a submodule."""
from filestore.adopt import adopt_data_file
from filestore.bucket import bucket_of
from filestore.coerce import conform_column, normalize_keys
from filestore.commit import CommitResult, FileStoreCommit, Overwrite
from filestore.compact import added_by, compact, delete_added_files, plan_compaction, sorted_run_counts
from filestore.compact_pick import sorted_runs
from filestore.context import StoreContext
from filestore.consumers import Consumer, ConsumerManager, check_consumer_id
from filestore.errors import (
    BucketMismatchError,
    CommitConflictError,
    CommitRetriesExhaustedError,
    ConcurrentUpdateError,
    ConditionalWriteUnsupportedError,
    ConsumerError,
    CorruptFileError,
    FileStoreError,
    InvalidWriteError,
    KeyCodecError,
    RetractionNotSupportedError,
    SchemaMismatchError,
    SequenceConflictError,
    SnapshotNotFoundError,
    TableDroppedError,
    TagError,
    TagExistsError,
    TagNotFoundError,
)
from filestore.datafile import read_data_file
from filestore.evolution import widens
from filestore.expire import ExpireResult, expire_snapshots, remove_orphan_files
from filestore.fileio import FileIO
from filestore.lease import Lease, acquire_lease, current_lease, release_lease, renew_lease, service_active
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
from filestore.options import ExpirationStrategy, FileStoreOptions, PartitionExpiry
from filestore.paths import TablePaths
from filestore.retry import RetryBudget
from filestore.scan import Split
from filestore.schema import SYSTEM_COLUMNS, SchemaManager, TableSchema
from filestore.reports import JobReport, JobReports
from filestore.store import FileStore
from filestore.tagging import create_tag, delete_tag
from filestore.tags import Tag, TagManager, check_tag_name
from filestore.partition import partition_value, render_partition_column
from filestore.partition_expire import (PartitionExpireResult, PartitionTimeExtractor, expire_partitions,
                                         pattern_references, strptime_format)
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
    "Consumer",
    "ConsumerError",
    "ConsumerManager",
    "CorruptFileError",
    "DEFAULT_AGGREGATE",
    "DEFAULT_PARTITION",
    "DataFileMeta",
    "ENGINES",
    "EngineName",
    "ExpirationStrategy",
    "ExpireResult",
    "FileIO",
    "FileStore",
    "FileStoreCommit",
    "FileStoreError",
    "FileStoreOptions",
    "FileStoreWrite",
    "InvalidWriteError",
    "JobReport",
    "JobReports",
    "KeyCodec",
    "KeyCodecError",
    "Lease",
    "LiveFiles",
    "ManifestCache",
    "ManifestEntry",
    "MergeEngine",
    "ORDER_FREE",
    "Overwrite",
    "Partition",
    "PartitionExpireResult",
    "PartitionExpiry",
    "PartitionTimeExtractor",
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
    "Tag",
    "TagError",
    "TagExistsError",
    "TagManager",
    "TagNotFoundError",
    "ValueKind",
    "acquire_lease",
    "added_by",
    "adopt_data_file",
    "bucket_of",
    "check_conditional_writes",
    "check_consumer_id",
    "check_tag_name",
    "compact",
    "conform_column",
    "create_tag",
    "current_lease",
    "delete_added_files",
    "delete_tag",
    "delta_version",
    "disable_manifest_cache",
    "enable_manifest_cache",
    "expire_partitions",
    "expire_snapshots",
    "is_s3",
    "normalize_keys",
    "partition_value",
    "pattern_references",
    "plan_compaction",
    "pool",
    "read_data_file",
    "release_lease",
    "remove_orphan_files",
    "render_partition_column",
    "renew_lease",
    "service_active",
    "sorted_run_counts",
    "sorted_runs",
    "strptime_format",
    "unsuitable_type",
    "widens",
]
