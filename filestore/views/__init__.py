"""The table's other views: each snapshot also published as a Delta Lake version (`metadata.delta.enabled`,
filestore.views.delta) and as an Iceberg snapshot (`metadata.iceberg.storage`, filestore.views.iceberg), so other
engines read the table's files directly.

Publishing runs after the snapshot is committed (filestore.commit, step 7) and is best effort: the commit has
happened, so a failure is logged, not raised (raising would invite a retry of a committed write). Each view catches
up from the snapshots it has not published yet at the next commit, so a crash between the snapshot and a view's
commit is repaired then.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from filestore import compact_pick
from filestore.live import LiveFiles
from filestore.meta import DataFileMeta
from filestore.schema import TableSchema

if TYPE_CHECKING:
    from filestore.context import StoreContext

log = logging.getLogger(__name__)


def plain_bucket(context: "StoreContext", schema: TableSchema, files: list[DataFileMeta]) -> bool | None:
    """Whether a bucket's files, read plainly (each minus its deletion vector, no merge), are its rows: always with
    deletion vectors; for a primary-key table without them, when the files are one sorted run without DELETE
    records (a compacted bucket); None for a table without a primary key, whose records' counts decide (each view
    says what it can express)."""
    if context.options.deletion_vectors:
        return True
    if any(f.delete_row_count for f in files):
        return False
    if schema.has_primary_key:
        return len(compact_pick.sorted_runs(files)) <= 1
    return None


def publish(context: "StoreContext", live: LiveFiles) -> None:
    """Publish `live` (the live files of a snapshot just committed) to every view the table has."""
    o = context.options
    if not (o.delta_metadata or o.iceberg_metadata):
        return
    from filestore.views import delta, iceberg  # only tables with views pay for importing them

    for enabled, view in ((o.delta_metadata, delta), (o.iceberg_metadata, iceberg)):
        if not enabled:
            continue
        try:
            view.publish(context, live)
        except Exception as e:  # noqa: BLE001 - best effort (module docstring); the next commit catches up
            log.warning("table %s: snapshot %s is committed, but its %s view was not published (%s: %s); the next "
                        "commit publishes it", context.table_name, live.snapshot_id, view.NAME, type(e).__name__, e)


def listed_files(context: "StoreContext") -> set[str]:
    """The table's own files (data files, deletion-vector files) that the latest published version of each view
    lists. Expiry and orphan removal keep them: a bucket a view does not publish yet (`plain_bucket`) keeps its
    previously published files listed, which a compaction may have replaced in the table since, and a reader of the
    view must still find them."""
    o = context.options
    if not (o.delta_metadata or o.iceberg_metadata):
        return set()
    from filestore.views import delta, iceberg

    found: set[str] = set()
    if o.delta_metadata:
        found |= delta.listed_files(context)
    if o.iceberg_metadata:
        found |= iceberg.listed_files(context)
    return found


def needed_view_file(context: "StoreContext") -> Callable[[str], bool]:
    """A test of whether a path is a file of a view's own directories that the view needs (orphan removal keeps
    those and may delete the rest of the Iceberg metadata directory): every file of the Delta log (its versions and
    checkpoints are the view's history); in the Iceberg metadata directory, what the latest metadata needs
    (iceberg.metadata_files, read at the first path there), or everything when the table no longer publishes
    Iceberg. False for any other path."""
    root = context.paths.root
    needed: set[str] | None = None

    def test(path: str) -> bool:
        nonlocal needed
        if path.startswith(f"{root}/_delta_log/"):
            return True
        if not path.startswith(f"{root}/metadata/"):
            return False
        if not context.options.iceberg_metadata:
            return True
        if needed is None:
            from filestore.views import iceberg

            needed = iceberg.metadata_files(context)
        return path in needed

    return test
