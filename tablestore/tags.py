"""Tags as the table API, SQL and the CLI show them: `Table.create_tag / delete_tag / tags`, the `$tags` system
table and `CALL managed.sys.create_tag / delete_tag` (tablestore.spark.sql_actions). The tags themselves, and what
survives expiry, are the file store's (filestore.tags).

`$tags` has Paimon's columns: tag_name, snapshot_id, schema_id, commit_time (when the tagged snapshot was
committed), record_count (its total record count), create_time (when the tag was made).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass

import pyarrow as pa

from filestore import FileStore, Tag, create_tag, delete_tag

_TIME = pa.timestamp("ms", tz="UTC")
TAGS = pa.schema([("tag_name", pa.string()), ("snapshot_id", pa.int64()), ("schema_id", pa.int64()),
                  ("commit_time", _TIME), ("record_count", pa.int64()), ("create_time", _TIME)])
"""The columns of `$tags` (Paimon's names)."""


@dataclass(frozen=True)
class TagInfo:
    """What `Table.tags()` describes of one tag. Also readable like a dict: info["snapshot_id"]."""

    name: str
    snapshot_id: int
    schema_id: int
    commit_time_millis: int
    """When the tagged snapshot was committed (epoch ms)."""
    record_count: int
    """The tagged snapshot's total record count."""
    create_time_millis: int
    """When the tag was made (epoch ms)."""

    @property
    def commit_time(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.commit_time_millis / 1000, tz=dt.timezone.utc)

    @property
    def create_time(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.create_time_millis / 1000, tz=dt.timezone.utc)

    def __getitem__(self, key: str) -> object:
        return getattr(self, key)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @staticmethod
    def of(tag: Tag) -> "TagInfo":
        s = tag.snapshot
        return TagInfo(tag.name, s.id, s.schema_id, s.time_millis, s.total_record_count, tag.create_time_millis)


def create(store: FileStore, name: str, snapshot: int | None = None) -> TagInfo:
    """Tag snapshot `snapshot` (default: the latest) as `name` (filestore.create_tag)."""
    return TagInfo.of(create_tag(store, name, snapshot))


def delete(store: FileStore, name: str) -> int:
    """Delete tag `name`; how many files only its expired snapshot used were deleted with it."""
    return delete_tag(store, name)


def infos(store: FileStore) -> list[TagInfo]:
    """Every tag, in the order they were made."""
    return [TagInfo.of(t) for t in store.tags.tags()]


def tags_table(store: FileStore) -> pa.Table:
    """`$tags`: one row per tag, in the order they were made."""
    return pa.Table.from_pylist([{"tag_name": t.name, "snapshot_id": t.snapshot_id, "schema_id": t.schema_id,
                                  "commit_time": t.commit_time_millis, "record_count": t.record_count,
                                  "create_time": t.create_time_millis} for t in infos(store)], TAGS)
