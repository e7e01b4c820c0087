"""A commit's log produced after its snapshot, bucket by bucket, wherever the caller runs each bucket (Spark: one
executor task per bucket, tablestore/spark/log_publish.py), so that no one process produces a table's whole log.
The protocol (docs/design.md, "The log produced by the executors"):

1. The write's tasks write data files. The driver publishes snapshot N as pending (`TableWriter.commit_prepared`
   with `defer_log`): N is listed in `Snapshot.log_pending` of every snapshot from N on, until step 3. Readers that
   hand over from a scan to the log (`full`) start before the first pending snapshot, so they read N's changes
   from the log, never twice.
2. Per bucket b with changes in N, one task runs `publish_bucket`: a producer with the transactional id of
   (table, N's commit user, b) starts, fencing any earlier attempt of that bucket (its open transaction is
   aborted); the marker of (topic, commit user) for partition b says whether an earlier attempt of this commit
   already committed: then its end offset is the answer. Otherwise N's changes in bucket b (`log_changes`: its
   files read back, or the snapshot's changelog for a table whose rows merge or whose log stores UPDATE_BEFORE)
   go into one transaction with the marker (Kafka's transactional offset commit: offset after the records,
   metadata = the commit identifier), which commits.
   The task returns the offset after the records.
3. The driver records the offsets in a log-only snapshot (kind COMPACT, N's commit user and identifier, no
   files) that takes N out of `log_pending` (`record_published`). A crash before it leaves N pending: the replay
   of that commit publishes it, and so does the next commit of any session on the table once N has been pending
   for `ORPHAN_AFTER_MS` (`pending_plans`), bucket by bucket as in 2, where the markers make each bucket's
   records land once.
Eventual consistency takes the same steps with an idempotent producer and no marker: a retried task produces its
bucket again (at least once, as eventual promises).
"""
from __future__ import annotations

import json
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterator, Mapping

import numpy as np
import pyarrow as pa

import filestore
import logstore
from filestore import CommitKind, FileStore, Snapshot
from tablestore.errors import TableStoreError
from tablestore.faults import fault_point
from tablestore.prepared import changes_of
from tablestore.snapshot_changes import bucket_changes, touched_keys

log_ = logging.getLogger(__name__)


@dataclass(frozen=True)
class PublishPlan:
    """What the tasks of one pending snapshot need: the snapshot, its commit (user, identifier), the buckets with
    changes (one task each: bucket = Kafka partition, whatever the table partition)."""

    snapshot_id: int
    commit_user: str
    identifier: int
    buckets: tuple[int, ...]

    def to_dict(self) -> dict[str, object]:
        return {"snapshot_id": self.snapshot_id, "commit_user": self.commit_user, "identifier": self.identifier,
                "buckets": list(self.buckets)}

    @staticmethod
    def from_dict(d: Mapping[str, object]) -> "PublishPlan":
        buckets = d["buckets"]
        assert isinstance(buckets, list)
        return PublishPlan(int(str(d["snapshot_id"])), str(d["commit_user"]), int(str(d["identifier"])),
                           tuple(int(b) for b in buckets))


ORPHAN_AFTER_MS = 60_000
"""A pending log of another commit user is published by a session only when it has been pending this long: its
own writer is gone (a crash it did not come back from), not publishing it right now (which would race)."""


def pending_plans(store: FileStore, commit_user: str | None = None) -> list[PublishPlan]:
    """The plans of the snapshots whose log is pending, oldest first: all of them (`commit_user` None), or those
    of `commit_user` and those of other users pending for `ORPHAN_AFTER_MS`."""
    latest = store.snapshots.latest()
    if latest is None:
        return []
    plans = []
    now_ms = time.time() * 1000
    for sid in latest.log_pending:
        snapshot = store.snapshots.get(sid)
        if commit_user is not None and snapshot.commit_user != commit_user and (
                now_ms - snapshot.time_millis < ORPHAN_AFTER_MS):
            continue
        buckets = sorted({m.bucket for m in filestore.added_by(store.context, snapshot) if m.added})
        plans.append(PublishPlan(sid, snapshot.commit_user, snapshot.commit_identifier, tuple(buckets)))
    return plans


def transactional_id(table: str, commit_user: str, bucket: int) -> str:
    return f"tablestore-{table}-{commit_user}-b{bucket}"


def marker_group(topic: str, commit_user: str) -> str:
    """The consumer group whose committed offsets are the markers of one commit user's log transactions."""
    return f"tablestore-log-{topic}-{commit_user}"


_WRITERS: "OrderedDict[tuple[str, str, str], tuple[logstore.LogWriter, int]]" = OrderedDict()
"""Started log writers of this process (an executor's Python worker, which Spark reuses), by (transactional id or
topic, topic, schema), with the commit identifier each last published: the next commit's task of the same bucket
skips `init_transactions` (about 60 ms). A cached producer may have been fenced meanwhile by an attempt in another
process. When that attempt published a later commit (the bucket's marker names it), the cached producer is known
to be fenced before any work (`_Superseded`); otherwise any failure redoes the bucket with a fresh producer, whose
start fences that attempt in turn (the marker keeps it once)."""
_KEEP_WRITERS = 8


def publish_bucket(table: str, store: FileStore, log: logstore.LogStore, plan: PublishPlan, bucket: int) -> int | None:
    """Step 2 for one bucket: the offset after its records of the plan's snapshot in partition `bucket` (None: the
    snapshot has no records there, or a later commit of the same user was published there since)."""
    transactional = log.options.consistency == "transactional"
    tid = transactional_id(table, plan.commit_user, bucket) if transactional else None
    key = (tid or log.topic, log.topic, str(log.schema))
    cached = _WRITERS.pop(key, None)
    if cached is not None:
        writer, published = cached
        try:
            end = _publish(store, log, plan, bucket, writer, published=published)
        except _Superseded as e:
            log_.info("table %s: %s: starting a new log producer", table, e)
            writer.close()
        except Exception as e:   # noqa: BLE001 - fenced, or broken: a fresh producer decides
            log_.info("table %s: bucket %s's cached log producer failed (%s): starting a new one", table, bucket, e)
            writer.close()
        else:
            _keep(key, writer, plan.identifier)
            return end
    writer = log.new_writer(tid)
    try:
        end = _publish(store, log, plan, bucket, writer, published=None)
    except BaseException:
        writer.close()
        raise
    _keep(key, writer, plan.identifier)
    return end


class _Superseded(Exception):
    """A cached producer of a bucket whose marker names a commit it did not publish: another process's producer
    of the same transactional id has published since, so this one is fenced."""


def _keep(key: tuple[str, str, str], writer: logstore.LogWriter, identifier: int) -> None:
    _WRITERS[key] = (writer, identifier)
    while len(_WRITERS) > _KEEP_WRITERS:
        _WRITERS.popitem(last=False)[1][0].close()


def _publish(store: FileStore, log: logstore.LogStore, plan: PublishPlan, bucket: int, writer: logstore.LogWriter,
             *, published: int | None) -> int | None:
    """`published`: None for a writer started here, else the identifier of the last commit the (cached) writer
    published."""
    transactional = log.options.consistency == "transactional"
    group = marker_group(log.topic, plan.commit_user)
    try:
        if transactional:
            if published is None:
                writer.start()   # init_transactions: an earlier attempt of this bucket is fenced, its transaction aborted
            found = log.marker(group, bucket)
            marked = int(found[1]) if found is not None and found[1].isdigit() else None   # its commit identifier
            if found is not None and marked is not None and marked >= plan.identifier:
                return found[0] if marked == plan.identifier else None
            if published is not None and marked is not None and marked > published:
                raise _Superseded(f"bucket {bucket}'s marker names commit {marked}, which another process published "
                                  f"after this process's producer published commit {published}")
        for changes, buckets in log_changes(store, log, store.snapshots.get(plan.snapshot_id), bucket):
            writer.write(changes, buckets)
        end = writer.prepare().get(bucket)
        if end is None:
            writer.abort()
            return None
        if transactional:
            writer.mark(group, bucket, end, str(plan.identifier))
        fault_point("log-bucket-producing")
        writer.commit()
        fault_point("log-bucket-published")
        return end
    except BaseException:
        writer.abort()
        raise


def publish_pending(table: str, store: FileStore, log: logstore.LogStore, commit_user: str) -> list[int]:
    """Steps 2 and 3 in this process, for the pending logs `pending_plans(store, commit_user)` lists: the ids of
    the log-only snapshots recorded (how a session without executors, such as the table API's, publishes a log of
    merged changes)."""
    recorded = []
    for plan in pending_plans(store, commit_user):
        offsets = {}
        for bucket in plan.buckets:
            end = publish_bucket(table, store, log, plan, bucket)
            if end is not None:
                offsets[bucket] = end
        sid = record_published(store, plan, offsets)
        if sid is not None:
            recorded.append(sid)
    return recorded


def merges_rows(store: FileStore) -> bool:
    """Whether the table's rows of one key merge otherwise than by plain deduplication (a `merge-engine` other
    than `deduplicate`, or a `sequence.field`): then its log holds the merged changes of each snapshot
    (`log_changes`), always produced after the snapshot."""
    return store.schema.has_primary_key and not store.options.merge_engine.is_default


def diffs_snapshots(store: FileStore, log: logstore.LogStore) -> bool:
    """Whether a commit's log, when it is made from the commit's files (a write prepared elsewhere, a log produced
    after its snapshot or again after a lost transaction), is the snapshot's changelog (`log_changes`) rather than
    the files' records: for a table whose rows merge, and for a primary-key table whose log stores UPDATE_BEFORE
    (`log.changelog-mode` = all), since a data file keeps no `-U` row and stores a `+U` as an addition like a
    `+I`. A writer that holds the rows it was given (TableWriter.write) produces them as given instead."""
    return merges_rows(store) or (store.schema.has_primary_key and log.options.changelog_mode == "all")


def log_changes(store: FileStore, log: logstore.LogStore, snapshot: Snapshot, bucket: int | None = None
                ) -> Iterator[tuple[pa.Table, np.ndarray]]:
    """The log records of a data snapshot (in `bucket`, or all), with the bucket of each: the one rule of what a
    table's log holds when it is made from a commit's files. A table that only deduplicates, with a log that
    stores no UPDATE_BEFORE, gets the records of the files the snapshot adds (tablestore.prepared.changes_of: what
    its writers wrote, merged within each file). Otherwise (`diffs_snapshots`) it gets the snapshot's changelog:
    each touched bucket merge-read as of the snapshot before and as of this one, and compared by key
    (tablestore.snapshot_changes): `+I` for a new key, `-U` (the old merged row) then `+U` (the new one) for a
    changed key, `-D` for a removed one, nothing for a key whose merged row did not change (a partial update that
    changes nothing, a first-row duplicate, a row rewritten unchanged)."""
    if not diffs_snapshots(store, log):
        messages = [m for m in filestore.added_by(store.context, snapshot) if bucket is None or m.bucket == bucket]
        yield from changes_of(store.context, messages)
        return
    parent = None
    if snapshot.id > 1:
        if not store.snapshots.exists(snapshot.id - 1):
            raise TableStoreError(f"table {store.context.table_name!r}: snapshot {snapshot.id - 1} has expired, so "
                                  f"the merged changes of snapshot {snapshot.id} cannot be computed for the log")
        parent = store.snapshots.get(snapshot.id - 1)
    touched = touched_keys(store, snapshot, bucket)   # the keys it can have changed: those of the files it adds
    for (_, b), changes in bucket_changes(store, parent, snapshot, touched.keys(), touched):
        yield changes, np.full(changes.num_rows, b, dtype=np.int32)


def record_published(store: FileStore, plan: PublishPlan, offsets: Mapping[int, int]) -> int | None:
    """Step 3: the log-only snapshot of `plan` with the buckets' end offsets; its id (None when the plan's snapshot
    is no longer pending: recorded by an earlier attempt)."""
    latest = store.snapshots.latest()
    if latest is None or plan.snapshot_id not in latest.log_pending:
        return None
    committer = store.new_commit(plan.commit_user)
    return committer.publish([], identifier=plan.identifier, kind=CommitKind.COMPACT, log_offsets=dict(offsets),
                             log_published=plan.snapshot_id).snapshot_id


def plans_json(plans: list[PublishPlan]) -> str:
    return json.dumps([p.to_dict() for p in plans])


def plans_from_json(text: str) -> list[PublishPlan]:
    return [PublishPlan.from_dict(d) for d in json.loads(text)]


def handover_snapshot(store: FileStore) -> filestore.Snapshot | None:
    """The snapshot a `full` read scans before it reads the log from that snapshot's offsets: the latest, or when
    logs are pending (step 1) the one before the first pending snapshot, whose changes then come from the log once
    they are published (None: the empty table before snapshot 1)."""
    latest = store.snapshots.latest()
    if latest is None or not latest.log_pending:
        return latest
    before = min(latest.log_pending) - 1
    if before < 1:
        return None
    if not store.snapshots.exists(before):   # expired: the scan cannot start before the pending commit
        return latest
    return store.snapshots.get(before)
