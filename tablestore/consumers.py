"""Consumers as a user sees them: `Table.consumers()`, `Table.reset_consumer(...)`, the `$consumers` system table
and `CALL managed.sys.reset_consumer(...)`, over the file store's consumer files (filestore.consumers, which
defines a consumer's offsets, its next snapshot and what expiry keeps for it).

A consumer is written by a change read that names it: `Table.read_changes(consumer_id=...)`
(tablestore.changes) and `spark.readStream.format("managed").option("consumer-id", ...)`
(tablestore.spark.stream_read).

`log_expired`: whether the table's topic no longer holds records the consumer has not read (its offset in some
partition is below the earliest offset the topic keeps: retention, `log.retention`, deleted them). Asked of Kafka
once per listing (one offsets request); None when the table has no log or Kafka did not answer.
"""
from __future__ import annotations

import datetime as dt
import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import pyarrow as pa

from filestore import Consumer, ConsumerManager, FileStore
from logstore import LogStore, LogStoreError

if TYPE_CHECKING:
    from catalog import CatalogTable

log = logging.getLogger(__name__)

CONSUMERS = pa.schema([("consumer_id", pa.string()), ("next_snapshot_id", pa.int64()),
                       ("log_offsets", pa.map_(pa.int32(), pa.int64())),
                       ("update_time", pa.timestamp("ms", tz="UTC")), ("expired", pa.bool_()),
                       ("log_expired", pa.bool_())])
"""The columns of `$consumers` (Paimon's are consumer_id and next_snapshot_id; the others are ours)."""


@dataclass(frozen=True)
class ConsumerInfo:
    """What `Table.consumers()` describes of one consumer. Also readable like a dict: info["next_snapshot_id"]."""

    consumer_id: str
    next_snapshot_id: int
    """The earliest snapshot whose changes it has not read all of (filestore.consumers, definition 2)."""
    log_offsets: Mapping[int, int]
    """Per bucket (topic partition), the offset of the first record it has not consumed."""
    update_time_millis: int
    expired: bool
    """Not updated for `consumer.expiration-time`: it keeps no snapshot, and the next expiry deletes it."""
    log_expired: bool | None = None
    """The topic no longer holds records it has not read (see the module's doc); None: unknown or no log."""

    @property
    def update_time(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.update_time_millis / 1000, tz=dt.timezone.utc)

    def __getitem__(self, key: str) -> object:
        return getattr(self, key)

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _earliest_offsets(name: str, log_store: LogStore | None) -> dict[int, int] | None:
    if log_store is None:
        return None
    try:
        return log_store.new_reader().start_at_timestamp(0)   # each partition's first record kept (or its end)
    except LogStoreError as e:
        log.warning("table %s: could not read the earliest offsets of its topic: %s", name, e)
        return None


def _info(c: Consumer, now_ms: int, expiration_ms: int | None, earliest: dict[int, int] | None,
          name: str) -> ConsumerInfo:
    lost = None
    if earliest is not None:
        lost = any(c.log_offsets.get(p, 0) < low for p, low in earliest.items())
        if lost:
            log.warning("table %s: consumer %s is behind the topic's retention: its offsets %s, the earliest kept "
                        "%s; records it has not read are gone", name, c.consumer_id, c.log_offsets, earliest)
    return ConsumerInfo(c.consumer_id, c.next_snapshot_id, dict(c.log_offsets), c.update_time_ms,
                        c.expired(now_ms, expiration_ms), lost)


def infos(store: FileStore, log_store: LogStore | None, now_ms: int | None = None) -> list[ConsumerInfo]:
    """Every consumer of the table, by id."""
    manager = ConsumerManager(store)
    found = manager.consumers()
    now = int(dt.datetime.now(dt.timezone.utc).timestamp() * 1000) if now_ms is None else now_ms
    earliest = _earliest_offsets(store.table_name, log_store) if found else None
    return [_info(c, now, manager.expiration_ms, earliest, store.table_name) for c in found]


def reset(store: FileStore, log_store: LogStore | None, consumer_id: str,
          snapshot: int | None) -> ConsumerInfo | None:
    """Move `consumer_id` so it next reads the changes of `snapshot` on (filestore.ConsumerManager.reset; created
    if absent), or with `snapshot` None delete it (nothing when there is none). The consumer afterwards, or None."""
    manager = ConsumerManager(store)
    if snapshot is None:
        manager.delete(consumer_id)
        return None
    c = manager.reset(consumer_id, snapshot)
    return _info(c, c.update_time_ms, manager.expiration_ms, _earliest_offsets(store.table_name, log_store),
                 store.table_name)


def consumers_table(handle: "CatalogTable") -> pa.Table:
    """`$consumers`: one row per consumer (the CONSUMERS columns)."""
    rows = [{"consumer_id": i.consumer_id, "next_snapshot_id": i.next_snapshot_id,
             "log_offsets": sorted(i.log_offsets.items()), "update_time": i.update_time_millis,
             "expired": i.expired, "log_expired": i.log_expired} for i in infos(handle.store, handle.log)]
    return pa.Table.from_pylist(rows, CONSUMERS)


def offsets_line(offsets: Mapping[int, int], buckets: Sequence[int]) -> dict[int, int]:
    """`offsets` for every bucket in `buckets` (0 for one it does not name): where a consumer resumes."""
    return {b: max(int(offsets.get(b, 0)), 0) for b in buckets}
