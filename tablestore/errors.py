"""The closed set of errors the user-facing ``tablestore`` package raises."""
from __future__ import annotations

import logstore


def _restore(cls: type, args: tuple, state: dict) -> BaseException:  # type: ignore[type-arg]
    """Unpickle an error without calling its `__init__` (whose arguments differ from `args`)."""
    error: BaseException = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class TableStoreError(Exception):
    """Root of every error raised by ``tablestore`` and its subpackages."""

    def __reduce__(self) -> tuple[object, ...]:
        """Errors cross process boundaries (Spark workers, writer processes) intact, whatever their `__init__`."""
        return (_restore, (type(self), self.args, self.__dict__))


class InvalidRowKindError(TableStoreError, logstore.InvalidRowKindError):
    """A change carries a row kind other than +I, -U, +U, -D; names the kinds (and the table, when known).
    The validation is logstore's (the owner of row kinds): this is its error, translated at the package edge."""

    def __init__(self, kind: object, table: str | None = None, *, reason: str | None = None, count: int = 0) -> None:
        if reason is None:
            reason = f"invalid row kind {kind!r}: expected one of {', '.join(logstore.ROW_KIND_VALUES)}"
        logstore.InvalidRowKindError.__init__(self, reason, table=table,
                                              kinds=kind if isinstance(kind, list) else [kind], count=count)
        self.kind = kind

    @classmethod
    def of(cls, e: logstore.InvalidRowKindError) -> "InvalidRowKindError":
        """The logstore error, as the tablestore one (same message)."""
        kind: object = e.kinds if len(e.kinds) != 1 else e.kinds[0]
        return cls(kind, e.table, reason=e.detail,
                   count=e.count)


class CompactionError(TableStoreError):
    """The compaction a commit runs after publishing failed. The commit itself is in (`snapshot_id`): nothing is
    lost and the data must not be written again; the files the compaction wrote were deleted."""

    def __init__(self, table: str, snapshot_id: int | None, cause: BaseException) -> None:
        super().__init__(f"table {table!r}: snapshot {snapshot_id} was committed (nothing is lost, do not write the "
                         f"data again), but compacting after it failed: {type(cause).__name__}: {cause}")
        self.table = table
        self.snapshot_id = snapshot_id


class LogPublishError(TableStoreError):
    """Producing the log of a table whose rows merge, after its commit, failed (tablestore.log_publish.log_changes:
    those changes exist only once the snapshot does). The commit itself is in (`snapshot_id`): nothing is lost and
    the data must not be written again; its log stays pending, and the writer's next commit publishes it (any
    writer's, once it has been pending for log_publish.ORPHAN_AFTER_MS)."""

    def __init__(self, table: str, snapshot_id: int | None, cause: BaseException) -> None:
        super().__init__(f"table {table!r}: snapshot {snapshot_id} was committed (nothing is lost, do not write the "
                         f"data again), but producing its log failed; the next commit publishes it: "
                         f"{type(cause).__name__}: {cause}")
        self.table = table
        self.snapshot_id = snapshot_id


class ChangesExpiredError(TableStoreError):
    """Reading a table's changes from a log offset compares them with the table's rows at the last snapshot at or
    before that offset (tablestore.log_changes), and that snapshot has expired. Names the table, the bucket, the
    offset or snapshot concerned and the earliest snapshot left."""

    def __init__(self, table: str, bucket: int, snapshot_id: int | None, earliest: int | None, *,
                 offset: int | None = None) -> None:
        needed = f"snapshot {snapshot_id}" if snapshot_id is not None else (
            f"the last snapshot at or before log offset {offset} (before snapshot {earliest})")
        super().__init__(
            f"table {table!r}: the changes of bucket {bucket} are compared with the table's rows at {needed}, which "
            f"has expired (the earliest snapshot left is {earliest}; see snapshot.num-retained.* and "
            "snapshot.time-retained): start reading again (scan 'full' or 'latest'), or read the log's records as "
            "they are stored with changelog.normalize = false")
        self.table = table
        self.bucket = bucket
        self.snapshot_id = snapshot_id
        self.earliest = earliest
        self.offset = offset
