"""The closed set of errors the file store raises. Every one carries the path or table concerned."""
from __future__ import annotations


def _restore(cls: type, args: tuple, state: dict) -> BaseException:  # type: ignore[type-arg]
    """Unpickle an error without calling its `__init__` (whose arguments differ from `args`)."""
    error: BaseException = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class FileStoreError(Exception):
    """Root of every error the file store raises."""

    def __reduce__(self) -> tuple[object, ...]:
        """Errors cross process boundaries (Spark workers, writer processes) intact, whatever their `__init__`."""
        return (_restore, (type(self), self.args, self.__dict__))


class CommitConflictError(FileStoreError):
    """A commit deletes a data file that is no longer live in the latest snapshot.

    Retrying the same commit cannot succeed: the writer must re-plan (e.g. rerun the compaction or overwrite).
    """

    def __init__(self, table: str, files: list[str]) -> None:
        shown = ", ".join(files[:5]) + (" ..." if len(files) > 5 else "")
        super().__init__(f"commit conflict on table {table!r}: files already deleted by another commit: {shown}")
        self.table = table
        self.files = files


class SequenceConflictError(CommitConflictError):
    """Another writer committed to the same bucket since this writer started: its sequence numbers would tie with
    ours and one update would be lost (or counts apply in no defined order). Re-plan the write on the latest
    snapshot (Table.write does so itself)."""

    def __init__(self, table: str, buckets: list[str]) -> None:
        FileStoreError.__init__(
            self, f"commit conflict on table {table!r}: another writer committed to bucket(s) "
            f"{', '.join(buckets[:5])} since this write started; retry it on the latest snapshot"
        )
        self.table = table
        self.files = []
        self.buckets = buckets


class ConcurrentUpdateError(CommitConflictError):
    """A write computed from snapshot `planned_on` (a MERGE or UPDATE: its old rows were read there) lost the race:
    a later commit changed a bucket it writes, so its rows may rest on values that are gone (a lost update).
    Nothing was committed; re-running the statement reads the latest snapshot."""

    def __init__(self, table: str, planned_on: int, snapshot: int, buckets: list[str]) -> None:
        FileStoreError.__init__(
            self, f"commit conflict on table {table!r}: snapshot {snapshot} changed bucket(s) "
            f"{', '.join(buckets[:5])} since snapshot {planned_on}, which this write's rows were read from; "
            "nothing was committed: run it again (it then reads the latest snapshot)"
        )
        self.table = table
        self.files = []
        self.buckets = buckets
        self.planned_on = planned_on
        self.snapshot = snapshot


class CommitRetriesExhaustedError(FileStoreError):
    """Other writers kept publishing first until the retry budget ran out."""


class SnapshotNotFoundError(FileStoreError):
    """A snapshot id or timestamp asked for does not exist (or was expired)."""


class CorruptFileError(FileStoreError):
    """A metadata or data file is missing, unreadable or could not be parsed; names the file (and the table)."""

    def __init__(self, path: str, reason: str, table: str | None = None) -> None:
        where = f"table {table!r}: " if table else ""
        super().__init__(f"{where}corrupt file {path}: {reason}")
        self.path = path
        self.table = table


class SchemaMismatchError(FileStoreError):
    """Data written does not fit the table's schema; names the table and the columns concerned."""


class KeyCodecError(FileStoreError):
    """A type has no order-preserving encoding, a value does not fit its type, or bytes are not a key."""

    def __init__(self, message: str, type: object | None = None) -> None:
        super().__init__(message if type is None else f"{message} (type {type})")
        self.type = type


class InvalidWriteError(FileStoreError):
    """A write is malformed: bad row kinds, rows outside a static overwrite partition, null primary keys..."""


class BucketMismatchError(InvalidWriteError):
    """A write told that all its rows belong to one bucket (`FileStoreWrite(..., bucket=b)`: the caller clustered
    them by the table's bucket function) was given a row of another bucket; nothing of that write is applied."""

    def __init__(self, table: str, bucket: int, found: int) -> None:
        super().__init__(f"table {table!r}: a write for bucket {bucket} was given rows of bucket {found}: its rows "
                         "were not clustered by the table's bucket function")
        self.table = table
        self.bucket = bucket
        self.found = found


class TableDroppedError(FileStoreError):
    """The table this handle was loaded from was dropped (and maybe created again under the same name, as another
    table): nothing was written. Load the table again to write to the new one."""

    def __init__(self, table: str, path: str, recreated: bool) -> None:
        what = "was dropped and created again (another table now)" if recreated else "was dropped"
        super().__init__(f"table {table!r} at {path} {what} since this handle was loaded: nothing was written; "
                         "get the table from the catalog again")
        self.table = table
        self.path = path
        self.recreated = recreated


class ConditionalWriteUnsupportedError(FileStoreError):
    """The object store under a warehouse accepted a second exclusive create (`PUT` with `If-None-Match: *`) of one
    key: snapshots published there could silently overwrite one another, so the warehouse is refused."""


class RetractionNotSupportedError(InvalidWriteError):
    """A write holds `-U`/`-D` rows that the table's merge engine cannot apply (partial-update, first-row), or that
    the aggregate function of one of its columns cannot retract (aggregation); nothing of that write is applied."""

    def __init__(self, table: str, engine: str, column: str | None, function: str | None) -> None:
        if column is None:
            message = (f"table {table!r}: merge-engine {engine} does not accept -U/-D rows (only +I/+U); "
                       "filter them out before writing, or use merge-engine deduplicate or aggregation")
        else:
            message = (f"table {table!r}: column {column!r} aggregates with {function}, which cannot retract -U/-D "
                       "rows (sum, count and last_value can); filter them out before writing, or choose another "
                       f"function with fields.{column}.aggregate-function")
        super().__init__(message)
        self.table = table
        self.engine = engine
        self.column = column
        self.function = function


class TagError(FileStoreError):
    """A tag (filestore.tags) cannot be created, read or deleted: a bad name, a snapshot that does not exist; names
    the table and the tag."""

    def __init__(self, table: str, tag: str, reason: str) -> None:
        super().__init__(f"table {table!r}: tag {tag!r} {reason}")
        self.table = table
        self.tag = tag


class TagExistsError(TagError):
    """A tag of that name exists already (a tag is never replaced: delete it first)."""


class TagNotFoundError(TagError, SnapshotNotFoundError):
    """No tag of that name (reading it, as `VERSION AS OF 'name'`, or deleting it)."""


class ConsumerError(FileStoreError):
    """A consumer (filestore.consumers) cannot be recorded, read or reset: a bad id, no such consumer, a snapshot it
    cannot be reset to; names the table and the consumer."""

    def __init__(self, table: str, consumer_id: str, reason: str) -> None:
        super().__init__(f"table {table!r}: consumer {consumer_id!r} {reason}")
        self.table = table
        self.consumer_id = consumer_id
