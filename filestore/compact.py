"""Compaction of one table: pick runs per bucket (compact_pick), read them merged the one way reads do
(`SplitRead.read_run`: the one merge function, or no merge for a single run), write the result as a run at the output
level, and hand back commit messages (files deleted + files added) for a COMPACT commit. Buckets compact in parallel
on the file store's worker pool. A concurrent overwrite that removed the same files makes that commit fail with CommitConflictError; the
data stays correct and compaction simply runs again later."""
from __future__ import annotations

import logging
from collections import defaultdict
from typing import TYPE_CHECKING, Collection

from filestore import compact_pick
from filestore.meta import CommitMessage, DataFileMeta, Partition, Snapshot
from filestore.parallel import pool, wait_all
from filestore.scan import Split

if TYPE_CHECKING:
    from filestore.store import FileStore

log = logging.getLogger(__name__)


def num_levels(store: "FileStore") -> int:
    return store.options.compaction_trigger + 1


def plan_compaction(
    store: "FileStore", snapshot: Snapshot | None, *, full: bool = False,
    buckets: Collection[tuple[Partition, int]] | None = None,
) -> list[tuple[Partition, int, compact_pick.CompactUnit]]:
    grouped: dict[tuple[Partition, int], list[DataFileMeta]] = defaultdict(list)
    for e in store.live_entries(snapshot).values():
        if buckets is None or (e.partition, e.bucket) in buckets:
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
) -> list[CommitMessage]:
    """Rewrite what `plan_compaction` picks; the commit messages to commit with CommitKind.COMPACT."""
    writer = store.data_file_writer()
    reader = store.new_read()

    def rewrite(plan: tuple[Partition, int, compact_pick.CompactUnit]) -> CommitMessage:
        partition, bucket, unit = plan
        split = Split(snapshot.id if snapshot else 0, partition, bucket, unit.files)
        run = reader.read_run(split, final=unit.drop_deletes)
        added = writer.write_run(run, partition, bucket, level=unit.output_level)
        log.debug("compacted %s files of %s/%s into %s at level %s", len(unit.files), partition, bucket,
                  len(added), unit.output_level)
        return CommitMessage(partition, bucket, store.options.bucket, tuple(added), unit.files)

    plans = plan_compaction(store, snapshot, full=full, buckets=buckets)
    if len(plans) <= 1:
        return [rewrite(p) for p in plans]
    futures = [pool().submit(rewrite, p) for p in plans]
    wait_all(futures)
    return [f.result() for f in futures]
