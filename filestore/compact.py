"""Compaction of one table: pick runs per bucket (compact_pick), merge them with the one merge function, write the
result as a run at the output level, and hand back commit messages (files deleted + files added) for a COMPACT
commit. A concurrent overwrite that removed the same files makes that commit fail with CommitConflictError; the
data stays correct and compaction simply runs again later."""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Collection

from filestore import compact_pick
from filestore.meta import CommitMessage, DataFileMeta, Partition, Snapshot
from filestore.merge import merge
from filestore.scan import Split

if TYPE_CHECKING:
    from filestore.store import FileStore

log = logging.getLogger(__name__)


def num_levels(store: "FileStore") -> int:
    return store.options.compaction_trigger + 1


def plan_compaction(
    store: "FileStore", snapshot: Snapshot | None, *, full: bool = False,
    buckets: Collection[tuple[Partition, int]] | None = None,
    partitions: Callable[[Partition], bool] | None = None,
) -> list[tuple[Partition, int, compact_pick.CompactUnit]]:
    """What to compact per bucket (of `buckets` / of the partitions `partitions` accepts, when given)."""
    grouped: dict[tuple[Partition, int], list[DataFileMeta]] = defaultdict(list)
    for e in store.live_entries(snapshot).values():
        if (buckets is None or (e.partition, e.bucket) in buckets) and (partitions is None or partitions(e.partition)):
            grouped[(e.partition, e.bucket)].append(e.file)
    o, levels = store.options, num_levels(store)
    plans = []
    for (partition, bucket), files in sorted(grouped.items()):
        runs = compact_pick.sorted_runs(files)
        unit = (
            compact_pick.full(runs, num_levels=levels)
            if full
            else compact_pick.pick(runs, num_levels=levels, trigger=o.compaction_trigger,
                                   max_size_amp=o.compaction_max_size_amplification_percent,
                                   size_ratio=o.compaction_size_ratio)
        )
        if unit is not None:
            plans.append((partition, bucket, unit))
    return plans


def compact(
    store: "FileStore", snapshot: Snapshot | None, *, full: bool = False,
    buckets: Collection[tuple[Partition, int]] | None = None,
    partitions: Callable[[Partition], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[CommitMessage]:
    """Rewrite what `plan_compaction` picks; the commit messages to commit with CommitKind.COMPACT.
    `progress(done, total)` is called with the bytes of input files rewritten so far, before and after each
    bucket."""
    messages = []
    writer = store.data_file_writer()
    s = store.schema
    plans = plan_compaction(store, snapshot, full=full, buckets=buckets, partitions=partitions)
    total, done = sum(f.file_size for _, _, unit in plans for f in unit.files), 0
    if progress is not None:
        progress(0, total)
    for partition, bucket, unit in plans:
        split = Split(snapshot.id if snapshot else 0, partition, bucket, unit.files)
        records = store.new_read().read_records(split)
        run = merge(records, s.key_columns, primary_key=s.has_primary_key, final=unit.drop_deletes)
        added = writer.write_run(run, partition, bucket, level=unit.output_level)
        log.debug("compacted %s files of %s/%s into %s at level %s", len(unit.files), partition, bucket,
                  len(added), unit.output_level)
        messages.append(CommitMessage(partition, bucket, store.options.bucket, tuple(added), unit.files))
        done += sum(f.file_size for f in unit.files)
        if progress is not None:
            progress(done, total)
    return messages
