"""tablestore: managed tables that are both a stream and a warehouse table.

    import tablestore
    cat = tablestore.Catalog("/path/to/warehouse")
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.orders", schema=..., primary_key=["id"])
    t.write(data); t.read()
"""
from catalog import (
    CatalogError,
    DatabaseAlreadyExistsError,
    DatabaseNotEmptyError,
    DatabaseNotFoundError,
    InvalidIdentifierError,
    InvalidOptionError,
    InvalidTableError,
    MergeEngineOptionError,
    SchemaEvolutionError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from filestore import (
    CommitConflictError,
    ConcurrentUpdateError,
    ConsumerError,
    FileStoreError,
    InvalidWriteError,
    RetractionNotSupportedError,
    SchemaMismatchError,
    SequenceConflictError,
    SnapshotNotFoundError,
    TableDroppedError,
    TagError,
    TagExistsError,
    TagNotFoundError,
)
from tablestore.catalog import Catalog
from tablestore.errors import (ChangesExpiredError, CompactionError, InvalidRowKindError, LogPublishError,
                               TableStoreError)
from tablestore.consumers import ConsumerInfo
from tablestore.merge import MergeError, MergeResult, TableMerger
from tablestore.table import DeleteResult, SnapshotInfo, Table
from tablestore.tags import TagInfo

__all__ = [
    "Catalog",
    "CatalogError",
    "ChangesExpiredError",
    "CommitConflictError",
    "CompactionError",
    "ConcurrentUpdateError",
    "ConsumerError",
    "ConsumerInfo",
    "DatabaseAlreadyExistsError",
    "DatabaseNotEmptyError",
    "DatabaseNotFoundError",
    "DeleteResult",
    "FileStoreError",
    "InvalidIdentifierError",
    "InvalidOptionError",
    "InvalidRowKindError",
    "InvalidTableError",
    "InvalidWriteError",
    "LogPublishError",
    "MergeEngineOptionError",
    "MergeError",
    "MergeResult",
    "RetractionNotSupportedError",
    "SchemaEvolutionError",
    "SchemaMismatchError",
    "SequenceConflictError",
    "SnapshotInfo",
    "SnapshotNotFoundError",
    "Table",
    "TableAlreadyExistsError",
    "TableDroppedError",
    "TableMerger",
    "TableNotFoundError",
    "TableStoreError",
    "TagError",
    "TagExistsError",
    "TagInfo",
    "TagNotFoundError",
]
