"""Snapshot expiration and orphan-file removal.

Expiration keeps the newest `snapshot.num-retained.min` snapshots always (and the latest one whatever the options
say: it is the table), never more than `snapshot.num-retained.max`, and in between those younger than
`snapshot.time-retained`. It expires from the
front only (ids stay contiguous), in this order:
1. move the EARLIEST hint past the expired ids and delete their snapshot files (no new reader can start on them);
2. delete every data file, manifest and manifest list that some expired snapshot used and no retained one does,
   nor any tag's snapshot (filestore.tags: the tags are listed after step 1, so a tag created meanwhile is seen),
   nor the latest published version of a Delta or Iceberg view (filestore.views.listed_files: a bucket a view
   does not publish yet stays listed with files a compaction has replaced in the table).
A crash between 1 and 2 leaves unreferenced files, which orphan removal deletes later.
Never expired: a snapshot a live consumer still needs (filestore.consumers); expiry first deletes the consumers
not updated for `consumer.expiration-time`.

Orphan removal deletes files under the table directory that no retained snapshot references and that are older
than a grace period (files of writes still in flight are young, so they survive), nor the views' (the Delta log,
and the Iceberg metadata its latest version needs: files a crashed or losing publisher left there are orphans).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from filestore import views
from filestore.consumers import ConsumerManager
from filestore.meta import Snapshot
from filestore.paths import snapshot_id_of, tag_name_of

if TYPE_CHECKING:
    from filestore.store import FileStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExpireResult:
    expired_snapshots: tuple[int, ...]
    deleted_files: int


def _referenced(store: "FileStore", snapshot: Snapshot) -> set[str]:
    """Every path a snapshot needs: its data files, manifests and manifest lists, its deletion-vector index and
    the vector files it names."""
    mio, paths = store.manifests, store.paths
    refs = {paths.manifest_file(snapshot.base_manifest_list), paths.manifest_file(snapshot.delta_manifest_list)}
    for name in (snapshot.base_manifest_list, snapshot.delta_manifest_list):
        for m in mio.read_manifest_list(name):
            refs.add(paths.manifest_file(m.file_name))
    live = store.context.live_files(snapshot)
    for e in live.entries.values():
        refs.add(store.data_file_path(e.partition, e.bucket, e.file.file_name))
    if snapshot.deletion_vectors:
        refs.add(paths.manifest_file(snapshot.deletion_vectors))
        refs |= {f"{paths.root}/{v.path}" for v in live.deletion_vectors.values()}
    return refs


def tagged_references(store: "FileStore", covered: set[int]) -> set[str]:
    """Every path the tags' snapshots need (filestore.tags), except those of the snapshots in `covered` (ids whose
    references the caller has already)."""
    refs: set[str] = set()
    seen = set(covered)
    for tag in store.context.tags.tags():
        if tag.snapshot.id not in seen:
            seen.add(tag.snapshot.id)
            refs |= _referenced(store, tag.snapshot)
    return refs


def _expire_count(store: "FileStore", snapshots: list[Snapshot], now_ms: int, retain_last: int | None) -> int:
    """How many of the oldest snapshots to expire: all but the newest `retain_last` when given, else per the
    table's retention options."""
    n = len(snapshots)
    if retain_last is not None:
        return max(0, n - retain_last)
    o = store.options
    expire_count = 0
    for i, s in enumerate(snapshots):
        remaining = n - i
        if remaining <= o.snapshot_num_retained_min:
            break
        if remaining > o.snapshot_num_retained_max or s.time_millis < now_ms - o.snapshot_time_retained_ms:
            expire_count = i + 1
        else:
            break
    return expire_count


def _unneeded(store: "FileStore", snapshots: list[Snapshot], now_ms: int) -> int:
    """How many of the oldest snapshots no live consumer needs (filestore.consumers, definitions 3-4), after deleting
    the expired consumers."""
    consumers = ConsumerManager(store)
    consumers.expire(now_ms)
    needed = consumers.protected_from(now_ms)
    return len(snapshots) if needed is None or not snapshots else max(0, needed - snapshots[0].id)


def expire_snapshots(store: "FileStore", now_ms: int | None = None, *, retain_last: int | None = None) -> ExpireResult:
    """Expire per the table's retention options, or (`retain_last`) keep only the newest `retain_last` snapshots
    whatever the options say. The latest snapshot is always kept."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    sm = store.snapshots
    snapshots = list(sm.snapshots())
    n = len(snapshots)
    expire_count = _expire_count(store, snapshots, now_ms, retain_last)
    expire_count = min(expire_count, n - 1)  # the latest snapshot is the table: never expired
    expire_count = min(expire_count, _unneeded(store, snapshots, now_ms))
    if expire_count <= 0:
        return ExpireResult((), 0)
    expired, retained = snapshots[:expire_count], snapshots[expire_count:]
    keep: set[str] = set()
    for s in retained:
        keep |= _referenced(store, s)
    candidates: set[str] = set()
    for s in expired:
        candidates |= _referenced(store, s)
    sm.set_earliest_hint(retained[0].id)
    for s in expired:
        sm.delete(s.id)
    keep |= tagged_references(store, {s.id for s in retained})   # after step 1: filestore.tags, invariant 4
    keep |= views.listed_files(store.context)   # a view's lagging bucket still lists replaced files
    doomed = sorted(candidates - keep)
    for path in doomed:
        store.io.delete(path)
    log.info("table %s: expired snapshots %s..%s, deleted %s files", store.table_name, expired[0].id,
             expired[-1].id, len(doomed))
    return ExpireResult(tuple(s.id for s in expired), len(doomed))


def remove_orphan_files(store: "FileStore", older_than_ms: int) -> list[str]:
    """Delete unreferenced files last modified before `older_than_ms` (epoch ms); returns their paths."""
    keep: set[str] = set()
    ids: set[int] = set()
    for s in store.snapshots.snapshots():
        keep |= _referenced(store, s)
        ids.add(s.id)
    keep |= tagged_references(store, ids)
    keep |= views.listed_files(store.context)
    view_needs = views.needed_view_file(store.context)
    removed = []
    for status in store.io.walk_files(store.paths.root):
        name = status.path.rsplit("/", 1)[-1]
        if status.path.startswith((store.paths.schema_dir + "/", store.paths.checkpoint_dir + "/",
                                   store.paths.service_dir + "/",   # the service's lease (filestore.lease)
                                   store.paths.consumer_dir + "/",   # consumers (filestore.consumers)
                                   store.paths.report_dir + "/")):   # jobs' reports (filestore.reports)
            continue
        if view_needs(status.path):
            continue  # the Delta log, and the Iceberg metadata its latest version needs (filestore.views)
        if status.path.startswith(store.paths.snapshot_dir + "/") and (
            snapshot_id_of(name) is not None or name in ("LATEST", "EARLIEST")
        ):
            continue
        if status.path.startswith(store.paths.tag_dir + "/") and tag_name_of(name) is not None:
            continue   # a tag (filestore.tags) goes only by delete_tag; a crashed create's temp file is an orphan
        if status.path in keep or status.mtime_ms >= older_than_ms:
            continue
        store.io.delete(status.path)
        removed.append(status.path)
    log.info("table %s: removed %s orphan files", store.table_name, len(removed))
    return removed
