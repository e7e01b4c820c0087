"""`StoreContext`: the values a part of the file store works with, and nothing that creates parts.

The scan, the split read, the write, the commit, compaction and the changes of a commit each take a context (the
table's file IO, paths, schema, options and name, with the snapshot and manifest readers built on them) instead of
the `FileStore` that creates them: a part cannot reach for another part through it, and a Spark task or any other
front door builds the parts it needs from the same few values. The context is frozen; its only state is two caches
of immutable things (schema files by id, and how a file of an older schema reads under this one).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filestore import deletion
from filestore.datafile import DataFileWriter
from filestore.errors import SnapshotNotFoundError, TableDroppedError
from filestore.evolution import FileLayout, read_file
from filestore.fileio import FileIO
from filestore.live import LiveFiles, read_live_files
from filestore.manifest import ManifestIO
from filestore.meta import DataFileMeta, ManifestEntry, Partition, Snapshot
from filestore.options import FileStoreOptions
from filestore.paths import TablePaths
from filestore.schema import SchemaManager, TableSchema
from filestore.snapshot import SnapshotManager
from filestore.tags import TagManager


@dataclass(frozen=True)
class StoreContext:
    io: FileIO
    paths: TablePaths
    schema: TableSchema
    options: FileStoreOptions
    table_name: str
    snapshots: SnapshotManager = field(init=False, repr=False, compare=False)
    manifests: ManifestIO = field(init=False, repr=False, compare=False)
    tags: TagManager = field(init=False, repr=False, compare=False)
    _schemas: dict[int, TableSchema] = field(default_factory=dict, repr=False, compare=False)
    _layouts: dict[int, FileLayout] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "snapshots", SnapshotManager(self.io, self.paths, self.table_name))
        object.__setattr__(self, "manifests", ManifestIO(self.io, self.paths, self.table_name))
        object.__setattr__(self, "tags", TagManager(self.io, self.paths, self.table_name))
        self._schemas.setdefault(self.schema.id, self.schema)

    @classmethod
    def of(cls, io: FileIO, root: str, schema: TableSchema, options: FileStoreOptions,
           table_name: str) -> "StoreContext":
        return cls(io, TablePaths(root, options.file_format), schema, options, table_name)

    # -- schema versions -----------------------------------------------------------------------
    def schema_of(self, schema_id: int) -> TableSchema:
        """The table's schema `schema_id` (the one a data file was written under), read once."""
        found = self._schemas.get(schema_id)
        if found is None:
            found = self._schemas[schema_id] = SchemaManager(self.io, self.paths).get(schema_id)
        return found

    def newest_schema(self, files: Sequence[DataFileMeta]) -> TableSchema:
        """This context's schema, or the newest schema `files` were written under when that is newer (a handle
        loaded before the table's schema changed reading files written after)."""
        newest = max((f.schema_id for f in files), default=self.schema.id)
        return self.schema if newest <= self.schema.id else self.schema_of(newest)

    def evolved(self, schema: TableSchema) -> "StoreContext":
        """This context under a newer `schema` of the same table (same options, the schema cache shared)."""
        if schema.id == self.schema.id:
            return self
        return StoreContext(self.io, self.paths, schema, self.options, self.table_name, _schemas=self._schemas)

    def layout(self, schema_id: int) -> FileLayout:
        """How a file of schema `schema_id` reads under this context's schema (filestore.evolution)."""
        found = self._layouts.get(schema_id)
        if found is None:
            file_schema = self.schema_of(schema_id)
            found = self._layouts[schema_id] = FileLayout.of(schema_id, file_schema.arrow_schema,
                                                             self.schema.arrow_schema, file_schema.field_ids,
                                                             self.schema.field_ids)
        return found

    # -- files ---------------------------------------------------------------------------------
    def read_file(self, partition: Partition, bucket: int, file: DataFileMeta, columns: Sequence[str],
                  filter: pc.Expression | None = None) -> pa.Table:
        """Columns `columns` (system or table columns) of one data file, read under this context's schema whatever
        schema the file was written under (filestore.evolution); `filter` keeps only matching rows. The rows its
        deletion vector names, if it carries one, are left out (filestore.deletion)."""
        if file.deletion_vector is not None:
            positions = deletion.deleted_positions(self, file.deletion_vector)
            path = self.data_file_path(partition, bucket, file.file_name)
            if self.options.file_format == "parquet" and self.layout(file.schema_id).plain:
                return deletion.read_parquet(self.io, path, columns, filter, positions)
            names = list(columns) if filter is None else [*dict.fromkeys([*columns, *self.schema.arrow_schema.names])]
            table = deletion.apply(read_file(self.io, path, self.options.file_format, self.layout(file.schema_id),
                                             self.schema.arrow_schema, names, None, self.table_name), positions)
            return table if filter is None else table.filter(filter).select(list(columns))
        return read_file(self.io, self.data_file_path(partition, bucket, file.file_name), self.options.file_format,
                         self.layout(file.schema_id), self.schema.arrow_schema, columns, filter, self.table_name)

    def data_file_path(self, partition: Partition, bucket: int, file_name: str) -> str:
        return self.paths.data_file(self.schema.partition_keys, partition, bucket, file_name)

    def data_file_writer(self) -> DataFileWriter:
        s = self.schema
        return DataFileWriter(
            self.io,
            self.paths,
            partition_keys=s.partition_keys,
            key_columns=s.key_columns,
            stats_columns=[f.name for f in s.arrow_schema],
            schema_id=s.id,
            file_format=self.options.file_format,
            compression=self.options.file_compression,
            target_file_size=self.options.target_file_size,
        )

    # -- identity and metadata -----------------------------------------------------------------
    def check_identity(self) -> None:
        """TableDroppedError unless the table this context was loaded from is still there (same `schema-<id>`,
        same uuid). Writers call it before writing any file and at every commit attempt, so a stale handle
        neither recreates a dropped table's directory nor commits into a table created again under its name."""
        path = self.paths.schema_file(self.schema.id)
        try:
            current = TableSchema.from_json(self.io.read_bytes(path).decode(), path)
        except FileNotFoundError:
            raise TableDroppedError(self.table_name, self.paths.root, recreated=False) from None
        if current.uuid != self.schema.uuid:
            raise TableDroppedError(self.table_name, self.paths.root, recreated=True)

    def live_files(self, snapshot: Snapshot | None) -> LiveFiles:
        """The live files of `snapshot` as a value (its manifests read once); pass it down rather than re-reading."""
        return read_live_files(self.manifests, snapshot)

    def live_entries(self, snapshot: Snapshot | None) -> dict[tuple[Partition, int, str], ManifestEntry]:
        """The live data files of `snapshot`, keyed by (partition, bucket, file name)."""
        return dict(self.live_files(snapshot).entries)

    def resolve_snapshot(self, snapshot_id: int | None = None, timestamp_ms: int | None = None,
                         tag: str | None = None) -> Snapshot | None:
        """The snapshot to read: a given id (a tag's copy once it expired: filestore.tags), the latest at or before
        a time, a tag's, or the latest one."""
        if sum(x is not None for x in (snapshot_id, timestamp_ms, tag)) > 1:
            raise SnapshotNotFoundError(f"table {self.table_name!r}: give a snapshot id, a timestamp or a tag, "
                                        "only one")
        if tag is not None:
            return self.tags.get(tag).snapshot
        if snapshot_id is not None:
            try:
                return self.snapshots.get(snapshot_id)
            except SnapshotNotFoundError:
                tagged = self.tags.tagged(snapshot_id)
                if tagged is None:
                    raise
                return tagged
        if timestamp_ms is not None:
            return self.snapshots.at_or_before(timestamp_ms)
        return self.snapshots.latest()
