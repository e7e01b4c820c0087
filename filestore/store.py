"""`FileStore`: one table's LSM storage, the facade the catalog and the table API use.

Plan on the driver (`new_scan().plan()`), read on workers (`new_read().read(split)`), write on workers
(`new_write()` -> `prepare_commit()` -> commit messages), commit on the driver (`new_commit(user).commit(messages)`).
The facade creates the parts; each part takes the store's `context` (filestore.context: file IO, paths, schema,
options, name), never the store, so a part cannot create another and any front door can build one from the values.
"""
from __future__ import annotations

import uuid
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filestore.commit import FileStoreCommit
from filestore.context import StoreContext
from filestore.datafile import DataFileWriter
from filestore.fileio import FileIO
from filestore.live import LiveFiles
from filestore.manifest import ManifestIO
from filestore.meta import DataFileMeta, ManifestEntry, Partition, Snapshot
from filestore.options import FileStoreOptions
from filestore.paths import TablePaths
from filestore.read import SplitRead
from filestore.scan import FileStoreScan, keys_filter
from filestore.schema import TableSchema
from filestore.snapshot import SnapshotManager
from filestore.tags import TagManager
from filestore.write import FileStoreWrite


class FileStore:
    def __init__(
        self, io: FileIO, root: str, schema: TableSchema, options: FileStoreOptions, table_name: str
    ) -> None:
        self.context = StoreContext.of(io, root, schema, options, table_name)

    @classmethod
    def of(cls, context: StoreContext) -> "FileStore":
        store = cls.__new__(cls)
        store.context = context
        return store

    # -- the context's values --------------------------------------------------------------------
    @property
    def io(self) -> FileIO:
        return self.context.io

    @property
    def schema(self) -> TableSchema:
        return self.context.schema

    @property
    def options(self) -> FileStoreOptions:
        return self.context.options

    @property
    def table_name(self) -> str:
        return self.context.table_name

    @property
    def paths(self) -> TablePaths:
        return self.context.paths

    @property
    def snapshots(self) -> SnapshotManager:
        return self.context.snapshots

    @property
    def manifests(self) -> ManifestIO:
        return self.context.manifests

    @property
    def tags(self) -> TagManager:
        return self.context.tags

    # -- schema versions -----------------------------------------------------------------------
    def schema_of(self, schema_id: int) -> TableSchema:
        return self.context.schema_of(schema_id)

    def newest_schema(self, files: Sequence[DataFileMeta]) -> TableSchema:
        return self.context.newest_schema(files)

    def evolved(self, schema: TableSchema) -> "FileStore":
        """This store under a newer `schema` of the same table (same options and caches)."""
        context = self.context.evolved(schema)
        return self if context is self.context else FileStore.of(context)

    def read_file(self, partition: Partition, bucket: int, file: DataFileMeta, columns: Sequence[str],
                  filter: pc.Expression | None = None) -> pa.Table:
        return self.context.read_file(partition, bucket, file, columns, filter)

    # -- identity and metadata -----------------------------------------------------------------
    def check_identity(self) -> None:
        self.context.check_identity()

    def live_files(self, snapshot: Snapshot | None) -> LiveFiles:
        return self.context.live_files(snapshot)

    def live_entries(self, snapshot: Snapshot | None) -> dict[tuple[Partition, int, str], ManifestEntry]:
        return self.context.live_entries(snapshot)

    def resolve_snapshot(self, snapshot_id: int | None = None, timestamp_ms: int | None = None,
                         tag: str | None = None) -> Snapshot | None:
        return self.context.resolve_snapshot(snapshot_id, timestamp_ms, tag)

    # -- plan, read, write, commit -------------------------------------------------------------
    def new_scan(self) -> FileStoreScan:
        return FileStoreScan(self.context)

    def new_read(self, columns: Sequence[str] | None = None, filter: pc.Expression | None = None) -> SplitRead:
        return SplitRead(self.context, columns, filter)

    def read_keys(self, live: LiveFiles, keys: pa.Table,
                  where: tuple[Partition | None, int | None] = (None, None)) -> pa.Table:
        """The merged rows at `live` (in `where`: a partition, a bucket or both, None: any) whose primary key is
        among the rows of `keys` (their key columns), plus possibly a few others for a composite key (the filter
        is per key column): the files whose key range holds none of the keys are pruned, and the key filter is
        applied below the merge, by the Parquet reader (filestore.read)."""
        if live.snapshot is None or keys.num_rows == 0:
            return self.schema.arrow_schema.empty_table()
        exact, bounds = keys_filter(keys, self.schema.primary_keys)
        return self.new_read(None, exact).to_table(self.new_scan().plan_live(live, bounds, where))

    def new_write(self, base: LiveFiles | None = None) -> FileStoreWrite:
        """A writer whose sequence numbers continue from `base`, the live files of the snapshot it writes on
        (default: read those of the latest snapshot)."""
        live = base if base is not None else self.live_files(self.snapshots.latest())
        return FileStoreWrite(self.context, live.max_sequence_numbers(), base=live)

    def new_commit(self, commit_user: str | None = None, *, new_user: bool = False) -> FileStoreCommit:
        """A committer for `commit_user` (a fresh one when None). `new_user=True` promises that user has never
        committed (it was just generated), which spares the idempotence scan of its first commit."""
        if commit_user is None:
            return FileStoreCommit(self.context, str(uuid.uuid4()), new_user=True)
        return FileStoreCommit(self.context, commit_user, new_user=new_user)

    def data_file_writer(self) -> DataFileWriter:
        return self.context.data_file_writer()

    def data_file_path(self, partition: Partition, bucket: int, file_name: str) -> str:
        return self.context.data_file_path(partition, bucket, file_name)
