"""Creating and deleting tags (filestore.tags, whose invariants 4 and 5 these operations keep): what the table API,
SQL and an automatic tagger (the service) call. A tag of a given name for a given snapshot (`create_tag`), the
tags in creation order (`TagManager.tags`), and `delete_tag`, which also deletes the files only its expired
snapshot used (the files a snapshot references are filestore.expire's to say)."""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from filestore.errors import SnapshotNotFoundError, TagError, TagExistsError
from filestore.expire import _referenced, tagged_references
from filestore.tags import Tag, check_tag_name

if TYPE_CHECKING:
    from filestore.store import FileStore

log = logging.getLogger(__name__)


def create_tag(store: "FileStore", name: str, snapshot_id: int | None = None, *,
               now_ms: int | None = None) -> Tag:
    """Tag snapshot `snapshot_id` (default: the latest) as `name`. TagExistsError when the name is taken; TagError
    for a bad name or a snapshot that does not exist (never written, or expired)."""
    table, tags, sm = store.table_name, store.context.tags, store.snapshots
    check_tag_name(table, name)
    if snapshot_id is None:
        snapshot = sm.latest()
        if snapshot is None:
            raise TagError(table, name, "cannot be created: the table has no snapshot yet")
    else:
        if isinstance(snapshot_id, bool) or not isinstance(snapshot_id, int):
            raise TagError(table, name, f"cannot be created: the snapshot must be an id, got {snapshot_id!r}")
        try:
            snapshot = sm.get(snapshot_id)
        except SnapshotNotFoundError:
            raise TagError(table, name, f"cannot be created: the table has no snapshot {snapshot_id} (never "
                           f"written or expired; retained: {_retained(store)})") from None
    tag = Tag(name, snapshot, int(time.time() * 1000) if now_ms is None else now_ms)
    if not tags.try_create(tag):
        raise TagExistsError(table, name, f"exists already (on snapshot {tags.get(name).snapshot.id}); delete it "
                             "first to move it")
    if not sm.exists(snapshot.id):   # invariant 4: expired while we tagged it, its files may be gone
        tags.delete_file(name)
        raise TagError(table, name, f"cannot be created: snapshot {snapshot.id} expired meanwhile")
    log.info("table %s: tagged snapshot %s as %s", table, snapshot.id, name)
    return tag


def _retained(store: "FileStore") -> str:
    earliest, latest = store.snapshots.earliest_id(), store.snapshots.latest_id()
    return "none" if earliest is None or latest is None else f"{earliest}..{latest}"


def delete_tag(store: "FileStore", name: str) -> int:
    """Delete tag `name` and, when its snapshot has expired, the files only it used (invariant 5); returns how many
    files were deleted. TagNotFoundError when there is no such tag."""
    tags, sm = store.context.tags, store.snapshots
    tag = tags.get(name)
    tags.delete_file(name)
    if sm.exists(tag.snapshot.id):   # expiry deletes its files when the snapshot expires
        log.info("table %s: deleted tag %s", store.table_name, name)
        return 0
    doomed = _referenced(store, tag.snapshot) - tagged_references(store, set())
    for s in sm.snapshots():
        doomed -= _referenced(store, s)
    for path in sorted(doomed):
        store.io.delete(path)
    log.info("table %s: deleted tag %s and %s files only its expired snapshot %s used", store.table_name, name,
             len(doomed), tag.snapshot.id)
    return len(doomed)

