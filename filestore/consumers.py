"""Consumers: a streaming reader's progress kept in the table, so snapshot expiry keeps what it still needs
(Paimon's consumer ids).

    <table>/consumer/consumer-<id>   JSON (on-disk names): {"nextSnapshot": N, "logOffsets": {"<bucket>": offset},
                                     "updateTime": epoch ms}

Definitions (a consumer reads the table's changes from its log, the LogStore; a snapshot's `log_offsets[b]` is the
offset after the last record of bucket b its commit wrote):
1. The consumer's log offsets O: per bucket, the offset of the first record it has not consumed (everything before
   it was handed to the reader's caller and processed).
2. Its next snapshot N (`next_snapshot_id`, Paimon's `nextSnapshot`): the earliest snapshot whose log offsets are not
   all at or below O, i.e. the first commit with a change the consumer has not read (a bucket a snapshot does not
   name counts as offset 0); the latest snapshot + 1 when it has read every commit. Snapshot offsets never
   decrease from one snapshot to the next, so N is found by a binary search over the retained snapshots.
3. What it needs: snapshots N - 1 and later. The changelog of commit N is computed from the table as it was before
   it (tablestore.log_changes, step 1: the latest snapshot whose offset is at or below the range's start), which is
   snapshot N - 1 (or an empty table when N = 1).
4. A consumer is live until it has not been updated for `consumer.expiration-time` (no such option: forever).
   Expiry (filestore.expire) never expires a snapshot a live consumer needs (3), and deletes the files of expired
   consumers (as Paimon does), which then protect nothing.
5. A consumer file is replaced whole by an atomic overwrite (`FileIO.replace_hint`: a rename over the old file
   locally, one PUT on S3), so a reader sees the old or the new progress, never a torn file. The last writer wins:
   one consumer id belongs to one reading job.
6. The log range a consumer needs is kept by the topic's retention (`log.retention`, Kafka's `retention.ms`), which
   knows nothing of consumers: `log_expired` (tablestore.consumers) tells when retention deleted records a consumer
   has not read.
"""
from __future__ import annotations

import json
import logging
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from filestore.errors import ConsumerError, CorruptFileError
from filestore.meta import Snapshot
from filestore.paths import consumer_id_of

if TYPE_CHECKING:
    from filestore.store import FileStore

log = logging.getLogger(__name__)

_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")


@dataclass(frozen=True)
class Consumer:
    """One consumer's progress (see the module's definitions 1-2)."""

    consumer_id: str
    next_snapshot_id: int
    log_offsets: dict[int, int] = field(default_factory=dict)
    update_time_ms: int = 0

    def to_json(self) -> str:
        return json.dumps({"nextSnapshot": self.next_snapshot_id,
                           "logOffsets": {str(b): o for b, o in sorted(self.log_offsets.items())},
                           "updateTime": self.update_time_ms}, indent=2)

    @staticmethod
    def from_json(consumer_id: str, text: str, path: str, table: str) -> "Consumer":
        try:
            d = json.loads(text)
            return Consumer(consumer_id, int(d["nextSnapshot"]),
                            {int(b): int(o) for b, o in dict(d.get("logOffsets") or {}).items()},
                            int(d.get("updateTime") or 0))
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise CorruptFileError(path, f"not a consumer file: {e}", table) from None

    def expired(self, now_ms: int, expiration_ms: int | None) -> bool:
        """Not updated for `expiration_ms` (None: consumers never expire)."""
        return expiration_ms is not None and self.update_time_ms < now_ms - expiration_ms


def check_consumer_id(table: str, consumer_id: object) -> str:
    """`consumer_id` if it may name a consumer (letters, digits, '_', '.', '-'; not starting with '.' or '-', not
    ending with '.tmp', at most 200 characters: it is part of a file name), else ConsumerError."""
    if not isinstance(consumer_id, str) or not _ID.fullmatch(consumer_id) or consumer_id.endswith(".tmp"):
        raise ConsumerError(table, str(consumer_id), "is not a consumer id: use letters, digits, '_', '.' and '-' "
                            "(not first), at most 200 characters")
    return consumer_id


def _covered(snapshot: Snapshot, offsets: Mapping[int, int]) -> bool:
    return all(o <= offsets.get(b, 0) for b, o in snapshot.log_offsets.items())


class ConsumerManager:
    """Reads and writes the consumer files of one table."""

    def __init__(self, store: "FileStore") -> None:
        self._store = store
        self._io = store.io
        self._paths = store.paths
        self.table = store.table_name
        self.expiration_ms = store.options.consumer_expiration_ms

    def get(self, consumer_id: str) -> Consumer | None:
        consumer_id = check_consumer_id(self.table, consumer_id)
        path = self._paths.consumer_file(consumer_id)
        try:
            text = self._io.read_bytes(path).decode()
        except FileNotFoundError:
            return None
        return Consumer.from_json(consumer_id, text, path, self.table)

    def consumers(self) -> list[Consumer]:
        """Every consumer of the table, by id."""
        found = []
        for status in self._io.list_dir(self._paths.consumer_dir):
            consumer_id = consumer_id_of(status.path.rsplit("/", 1)[-1])
            if consumer_id is None or status.is_dir:
                continue
            try:
                text = self._io.read_bytes(status.path).decode()
            except FileNotFoundError:
                continue   # deleted since the listing
            found.append(Consumer.from_json(consumer_id, text, status.path, self.table))
        return sorted(found, key=lambda c: c.consumer_id)

    def next_snapshot(self, offsets: Mapping[int, int]) -> int:
        """Definition 2: the earliest retained snapshot whose offsets are not all at or below `offsets`, or the
        latest + 1 (1 for a table without a snapshot)."""
        sm = self._store.snapshots
        latest = sm.latest_id()
        if latest is None:
            return 1
        lo, hi = sm.earliest_id() or 1, latest + 1   # invariant: the answer is in [lo, hi]
        while lo < hi:
            mid = (lo + hi) // 2
            if _covered(sm.get(mid), offsets):
                lo = mid + 1
            else:
                hi = mid
        return lo

    def record(self, consumer_id: str, offsets: Mapping[int, int], now_ms: int | None = None, *,
               next_snapshot: int | None = None) -> Consumer:
        """Write `consumer_id`'s progress: it has consumed the log up to `offsets` (definition 1). A reader of a
        table without a log reads snapshot by snapshot and gives `next_snapshot` itself (no offsets)."""
        consumer_id = check_consumer_id(self.table, consumer_id)
        offsets = {int(b): max(int(o), 0) for b, o in offsets.items()}
        n = self.next_snapshot(offsets) if next_snapshot is None else next_snapshot
        consumer = Consumer(consumer_id, n, offsets, _now(now_ms))
        self._write(consumer)
        return consumer

    def reset(self, consumer_id: str, next_snapshot_id: int, now_ms: int | None = None) -> Consumer:
        """Move `consumer_id` (created if absent) so it reads the changes of snapshot `next_snapshot_id` and later
        next: its offsets become those of snapshot `next_snapshot_id` - 1 (definition 3: that snapshot must still
        exist, or `next_snapshot_id` be 1); `next_snapshot_id` = latest + 1 skips to the end."""
        consumer_id = check_consumer_id(self.table, consumer_id)
        sm = self._store.snapshots
        latest = sm.latest_id() or 0
        n = next_snapshot_id
        if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > latest + 1:
            raise ConsumerError(self.table, consumer_id, f"cannot be reset to snapshot {n!r}: give a snapshot "
                                f"from 1 to {latest + 1} (the latest + 1: only changes committed from now on)")
        if n > 1 and not sm.exists(n - 1):
            earliest = sm.earliest_id()
            raise ConsumerError(self.table, consumer_id, f"cannot be reset to snapshot {n}: its changes are computed "
                                f"from snapshot {n - 1}, which has expired; the earliest possible is "
                                f"{(earliest or 0) + 1}")
        offsets = dict(sm.get(n - 1).log_offsets) if n > 1 else {}
        consumer = Consumer(consumer_id, n, offsets, _now(now_ms))
        self._write(consumer)
        log.info("table %s: consumer %s reset to snapshot %s", self.table, consumer_id, n)
        return consumer

    def delete(self, consumer_id: str) -> bool:
        """Delete the consumer; False when there was none."""
        consumer_id = check_consumer_id(self.table, consumer_id)
        path = self._paths.consumer_file(consumer_id)
        if not self._io.exists(path):
            return False
        self._io.delete(path)
        log.info("table %s: consumer %s deleted", self.table, consumer_id)
        return True

    def protected_from(self, now_ms: int | None = None) -> int | None:
        """The earliest snapshot a live consumer needs (definition 3), None when no live consumer needs any."""
        now = _now(now_ms)
        needed = [c.next_snapshot_id - 1 for c in self.consumers() if not c.expired(now, self.expiration_ms)]
        return min(needed) if needed else None

    def expire(self, now_ms: int | None = None) -> list[str]:
        """Delete the consumers not updated for `consumer.expiration-time`; their ids."""
        now = _now(now_ms)
        gone = [c.consumer_id for c in self.consumers() if c.expired(now, self.expiration_ms)]
        for consumer_id in gone:
            self._io.delete(self._paths.consumer_file(consumer_id))
        if gone:
            log.info("table %s: expired consumers %s (not updated for %s ms)", self.table, ", ".join(gone),
                     self.expiration_ms)
        return gone

    def _write(self, consumer: Consumer) -> None:
        self._io.replace_hint(self._paths.consumer_file(consumer.consumer_id), consumer.to_json().encode())


def _now(now_ms: int | None) -> int:
    return int(time.time() * 1000) if now_ms is None else now_ms
