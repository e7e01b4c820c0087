"""`FileStore`: one table's LSM storage, the facade the catalog and the table API use.

Plan on the driver (`new_scan().plan()`), read on workers (`new_read().read(split)`), write on workers
(`new_write()` -> `prepare_commit()` -> commit messages), commit on the driver (`new_commit(user).commit(messages)`).
"""
from __future__ import annotations

import uuid
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filestore.commit import FileStoreCommit
from filestore.datafile import DataFileWriter
from filestore.errors import SnapshotNotFoundError, TableDroppedError
from filestore.evolution import FileLayout, read_file
from filestore.fileio import FileIO
from filestore.live import LiveFiles, read_live_files
from filestore.manifest import ManifestIO
from filestore.meta import DataFileMeta, ManifestEntry, Partition, Snapshot
from filestore.options import FileStoreOptions
from filestore.paths import TablePaths
from filestore.read import SplitRead
from filestore.scan import FileStoreScan
from filestore.schema import SchemaManager, TableSchema
from filestore.snapshot import SnapshotManager
from filestore.write import FileStoreWrite


class FileStore:
    def __init__(
        self, io: FileIO, root: str, schema: TableSchema, options: FileStoreOptions, table_name: str
    ) -> None:
        self.io = io
        self.schema = schema
        self.options = options
        self.table_name = table_name
        self.paths = TablePaths(root, options.file_format)
        self.snapshots = SnapshotManager(io, self.paths, table_name)
        self.manifests = ManifestIO(io, self.paths, table_name)
        self._schemas: dict[int, TableSchema] = {schema.id: schema}  # schema files never change: cached by id
        self._layouts: dict[int, FileLayout] = {}

    # -- schema versions -----------------------------------------------------------------------
    def schema_of(self, schema_id: int) -> TableSchema:
        """The table's schema `schema_id` (the one a data file was written under), read once."""
        found = self._schemas.get(schema_id)
        if found is None:
            found = self._schemas[schema_id] = SchemaManager(self.io, self.paths).get(schema_id)
        return found

    def newest_schema(self, files: Sequence[DataFileMeta]) -> TableSchema:
        """This store's schema, or the newest schema `files` were written under when that is newer (a handle
        loaded before the table's schema changed reading files written after)."""
        newest = max((f.schema_id for f in files), default=self.schema.id)
        return self.schema if newest <= self.schema.id else self.schema_of(newest)

    def evolved(self, schema: TableSchema) -> "FileStore":
        """This store under a newer `schema` of the same table (same options and caches)."""
        if schema.id == self.schema.id:
            return self
        store = FileStore(self.io, self.paths.root, schema, self.options, self.table_name)
        store._schemas = self._schemas
        return store

    def layout(self, schema_id: int) -> FileLayout:
        """How a file of schema `schema_id` reads under this store's schema (filestore.evolution)."""
        found = self._layouts.get(schema_id)
        if found is None:
            file_schema = self.schema_of(schema_id).arrow_schema
            found = self._layouts[schema_id] = FileLayout.of(schema_id, file_schema, self.schema.arrow_schema)
        return found

    def read_file(self, partition: Partition, bucket: int, file: DataFileMeta, columns: Sequence[str],
                  filter: pc.Expression | None = None) -> pa.Table:
        """Columns `columns` (system or table columns) of one data file, read under this store's schema whatever
        schema the file was written under (filestore.evolution); `filter` keeps only matching rows."""
        return read_file(self.io, self.data_file_path(partition, bucket, file.file_name), self.options.file_format,
                         self.layout(file.schema_id), self.schema.arrow_schema, columns, filter, self.table_name)

    # -- identity ------------------------------------------------------------------------------
    def check_identity(self) -> None:
        """TableDroppedError unless the table this store was loaded from is still there (same `schema-<id>`,
        same uuid). Writers call it before writing any file and at every commit attempt, so a stale handle
        neither recreates a dropped table's directory nor commits into a table created again under its name."""
        path = self.paths.schema_file(self.schema.id)
        try:
            current = TableSchema.from_json(self.io.read_bytes(path).decode(), path)
        except FileNotFoundError:
            raise TableDroppedError(self.table_name, self.paths.root, recreated=False) from None
        if current.uuid != self.schema.uuid:
            raise TableDroppedError(self.table_name, self.paths.root, recreated=True)

    # -- metadata ------------------------------------------------------------------------------
    def live_files(self, snapshot: Snapshot | None) -> LiveFiles:
        """The live files of `snapshot` as a value (its manifests read once); pass it down rather than re-reading."""
        return read_live_files(self.manifests, snapshot)

    def live_entries(self, snapshot: Snapshot | None) -> dict[tuple[Partition, int, str], ManifestEntry]:
        """The live data files of `snapshot`, keyed by (partition, bucket, file name)."""
        return dict(self.live_files(snapshot).entries)

    def resolve_snapshot(self, snapshot_id: int | None = None, timestamp_ms: int | None = None) -> Snapshot | None:
        """The snapshot to read: a given id, the latest at or before a time, or the latest one."""
        if snapshot_id is not None and timestamp_ms is not None:
            raise SnapshotNotFoundError("give a snapshot id or a timestamp, not both")
        if snapshot_id is not None:
            return self.snapshots.get(snapshot_id)
        if timestamp_ms is not None:
            return self.snapshots.at_or_before(timestamp_ms)
        return self.snapshots.latest()

    # -- plan, read, write, commit -------------------------------------------------------------
    def new_scan(self) -> FileStoreScan:
        return FileStoreScan(self)

    def new_read(self, columns: Sequence[str] | None = None, filter: pc.Expression | None = None) -> SplitRead:
        return SplitRead(self, columns, filter)

    def new_write(self, base: LiveFiles | None = None) -> FileStoreWrite:
        """A writer whose sequence numbers continue from `base`, the live files of the snapshot it writes on
        (default: read those of the latest snapshot)."""
        live = base if base is not None else self.live_files(self.snapshots.latest())
        return FileStoreWrite(self, live.max_sequence_numbers())

    def new_commit(self, commit_user: str | None = None, *, new_user: bool = False) -> FileStoreCommit:
        """A committer for `commit_user` (a fresh one when None). `new_user=True` promises that user has never
        committed (it was just generated), which spares the idempotence scan of its first commit."""
        if commit_user is None:
            return FileStoreCommit(self, str(uuid.uuid4()), new_user=True)
        return FileStoreCommit(self, commit_user, new_user=new_user)

    def data_file_writer(self) -> DataFileWriter:
        s = self.schema
        stats_columns = [f.name for f in s.arrow_schema]
        return DataFileWriter(
            self.io,
            self.paths,
            partition_keys=s.partition_keys,
            key_columns=s.key_columns,
            stats_columns=stats_columns,
            schema_id=s.id,
            file_format=self.options.file_format,
            compression=self.options.file_compression,
            target_file_size=self.options.target_file_size,
        )

    def data_file_path(self, partition: Partition, bucket: int, file_name: str) -> str:
        return self.paths.data_file(self.schema.partition_keys, partition, bucket, file_name)
