"""The maintenance half of `tablestore.Table`: snapshot expiry, orphan removal, tags, partition expiry and
consumers, each a thin call into the module that owns it (filestore.expire, tablestore.tags,
tablestore.partition_expiry, tablestore.consumers). `Table` inherits it."""
from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

from filestore import ExpireResult, expire_snapshots, remove_orphan_files
from tablestore import consumers as _consumers
from tablestore import tags as _tags
from tablestore.errors import TableStoreError
from tablestore.partition_expiry import Duration, expire_partitions

if TYPE_CHECKING:
    import catalog
    from filestore import FileStore

DEFAULT_ORPHAN_GRACE = dt.timedelta(days=1)


class TableMaintenance:
    """What keeps a table healthy; `Table` provides the handle and the file store."""

    _handle: "catalog.CatalogTable"
    _store: "FileStore"

    def expire_snapshots(self, *, retain_last: int | None = None) -> ExpireResult:
        """Expire snapshots per `snapshot.num-retained.min/max` and `snapshot.time-retained`; or, with
        `retain_last`, all but the newest `retain_last` snapshots (at least 1), whatever those options say."""
        if retain_last is not None and (isinstance(retain_last, bool) or not isinstance(retain_last, int)
                                        or retain_last < 1):
            raise TableStoreError(f"table {self._handle.identifier!r}: retain_last must be an integer of at least 1 (the latest "
                                  f"snapshot is the table), got {retain_last!r}")
        return expire_snapshots(self._store, retain_last=retain_last)

    def create_tag(self, name: str, snapshot: int | None = None) -> _tags.TagInfo:
        """Tag snapshot `snapshot` (default: the latest) as `name`: `read(tag=name)` reads it; expiry keeps it."""
        return _tags.create(self._store, name, snapshot)

    def delete_tag(self, name: str) -> None:
        """Delete tag `name` (and the files only its expired snapshot used)."""
        _tags.delete(self._store, name)

    def tags(self) -> list[_tags.TagInfo]:
        return _tags.infos(self._store)

    def expire_partitions(self, now: dt.datetime | None = None, *, expiration_time: Duration | None = None,
                          timestamp_pattern: str | None = None, timestamp_formatter: str | None = None
                          ) -> list[dict[str, Any]]:
        """Drop partitions older than `partition.expiration-time` in one commit (tablestore.partition_expiry)."""
        return expire_partitions(self._handle, now, expiration_time=expiration_time,
                                 timestamp_pattern=timestamp_pattern, timestamp_formatter=timestamp_formatter)

    def remove_orphan_files(self, older_than: dt.datetime | dt.timedelta | int | None = None) -> list[str]:
        """Delete files no snapshot references, last modified before `older_than` (a datetime, an age as a
        timedelta, or epoch milliseconds; default: one day ago). Returns the removed paths."""
        now_ms = int(time.time() * 1000)
        if older_than is None:
            older_than = DEFAULT_ORPHAN_GRACE
        if isinstance(older_than, dt.timedelta):
            cutoff = now_ms - int(older_than.total_seconds() * 1000)
        elif isinstance(older_than, dt.datetime):
            cutoff = int(older_than.timestamp() * 1000)
        else:
            cutoff = int(older_than)
        return remove_orphan_files(self._store, cutoff)

    def consumers(self) -> list[_consumers.ConsumerInfo]:
        """The table's consumers (`read_changes(consumer_id=...)`, Spark's `consumer-id`), by id."""
        return _consumers.infos(self._store, self._handle.log)

    def reset_consumer(self, consumer_id: str, snapshot: int | None = None) -> _consumers.ConsumerInfo | None:
        """Make consumer `consumer_id` next read the changes of `snapshot` on; without `snapshot`, delete it."""
        return _consumers.reset(self._store, self._handle.log, consumer_id, snapshot)
