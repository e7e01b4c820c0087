"""`Table.expire_partitions` and `CALL managed.sys.expire_partitions`: drop the partitions older than
`partition.expiration-time` (how a partition's time is read and how it is dropped: filestore.partition_expire).

The drop is one OVERWRITE snapshot of the file store; the table's log (Kafka) gets nothing: no `-D` per row, as in
Paimon. A streaming reader of the log keeps the rows it read; a `full` scan started after the drop does not see
the partitions (it starts from a snapshot without them).
"""
from __future__ import annotations

import datetime as dt
from typing import Any

import catalog as _catalog
from filestore import expire_partitions as _expire, partition_value
from tablestore.errors import TableStoreError

Duration = str | dt.timedelta


def _text(duration: Duration | None) -> str | None:
    if isinstance(duration, dt.timedelta):
        return f"{int(duration.total_seconds() * 1000)} ms"
    return duration


def wall_clock(now: dt.datetime | None) -> dt.datetime:
    """`now` as the zone-less wall-clock time partition values are compared with: a naive datetime as is, an aware
    one in this machine's zone; None: the current local time (as Paimon's LocalDateTime.now())."""
    if now is None:
        return dt.datetime.now()
    if not isinstance(now, dt.datetime):
        raise TableStoreError(f"now must be a datetime, got {now!r}")
    return now if now.tzinfo is None else now.astimezone().replace(tzinfo=None)


def expire_partitions(handle: _catalog.CatalogTable, now: dt.datetime | None = None, *,
                      expiration_time: Duration | None = None, timestamp_pattern: str | None = None,
                      timestamp_formatter: str | None = None) -> list[dict[str, Any]]:
    """Drop the expired partitions of the table in one commit; the partitions dropped as {column: value}, oldest
    first ([] when none, or on a table without partition columns). The arguments override the table's
    `partition.expiration-time`, `partition.timestamp-pattern` and `partition.timestamp-formatter` for this call."""
    schema = handle.schema
    policy = _catalog.partition_expiry_of(
        handle.identifier, schema.partition_keys, handle.options, expiration_time=_text(expiration_time),
        timestamp_pattern=timestamp_pattern, timestamp_formatter=timestamp_formatter)
    if policy.expiration_ms is None:
        raise TableStoreError(f"table {handle.identifier!r}: option {_catalog.PARTITION_EXPIRATION_TIME.key!r} is "
                              f"not set; set it or give expiration_time")
    result = _expire(handle.store, policy, wall_clock(now))
    fields = schema.arrow_schema
    return [{k: partition_value(v, fields.field(k).type).as_py() for k, v in zip(schema.partition_keys, p)}
            for p in result.partitions]
