"""Compaction of one table: pick runs per bucket (compact_pick), read them merged the one way reads do
(`SplitRead.read_run`: the one merge function, or no merge for a single run), write the result as a run at the output
level under the newest schema of the context and its input files (files of older schemas are rewritten under it:
filestore.evolution), and hand back commit messages (files deleted + files added) for a COMPACT commit. Buckets
compact in parallel on the file store's worker pool. A concurrent overwrite that removed the same files makes that
commit fail with CommitConflictError; the data stays correct and compaction simply runs again later."""
from __future__ import annotations

import logging
from concurrent.futures import wait
from typing import Callable, Collection, Sequence

from filestore import compact_pick
from filestore.live import LiveFiles
from filestore.meta import CommitMessage, FileKind, ManifestEntry, Partition, Snapshot
from filestore.parallel import pool
from filestore.read import SplitRead
from filestore.scan import Split
from filestore.context import StoreContext


log = logging.getLogger(__name__)


def num_levels(context: StoreContext) -> int:
    return context.options.compaction_trigger + 1


def sorted_run_counts(live: LiveFiles, buckets: Collection[tuple[Partition, int]] | None = None
                      ) -> dict[tuple[Partition, int], int]:
    """How many sorted runs each bucket (of `buckets`, when given) has in `live`."""
    return {where: len(compact_pick.sorted_runs(files)) for where, files in live.files_by_bucket(buckets).items()}


def plan_compaction(
    context: StoreContext, snapshot: Snapshot | None, *, full: bool = False,
    buckets: Collection[tuple[Partition, int]] | None = None, live: LiveFiles | None = None,
    trigger: int | None = None, partitions: Callable[[Partition], bool] | None = None,
) -> list[tuple[Partition, int, compact_pick.CompactUnit]]:
    """What to compact per bucket (of `buckets` / of the partitions `partitions` accepts, when given). `live`: the
    live files of `snapshot` when the caller has them (else they are read). `trigger`: the run count to pick down
    to instead of `num-sorted-run.compaction-trigger` (a writer at its stop trigger)."""
    if live is None:
        live = context.live_files(snapshot)
    grouped = {where: files for where, files in live.files_by_bucket(buckets).items()
               if partitions is None or partitions(where[0])}
    o, levels = context.options, num_levels(context)
    plans = []
    for (partition, bucket), files in sorted(grouped.items()):
        runs = compact_pick.sorted_runs(files)
        unit = (
            compact_pick.full(runs, num_levels=levels)
            if full
            else compact_pick.pick(runs, num_levels=levels, trigger=trigger or o.compaction_trigger,
                                   max_size_amp=o.compaction_max_size_amplification_percent,
                                   size_ratio=o.compaction_size_ratio)
        )
        if unit is not None:
            plans.append((partition, bucket, unit))
    return plans


def compact(
    context: StoreContext, snapshot: Snapshot | None, *, full: bool = False,
    buckets: Collection[tuple[Partition, int]] | None = None, live: LiveFiles | None = None,
    trigger: int | None = None, partitions: Callable[[Partition], bool] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> list[CommitMessage]:
    """Rewrite what `plan_compaction` picks; the commit messages to commit with CommitKind.COMPACT. Buckets are
    rewritten in parallel on the worker pool. If rewriting a bucket fails, the files already written for the others
    are deleted before the error propagates. `progress(done, total)` is called with the bytes of input files
    rewritten so far, before and after each bucket (in plan order)."""
    plans = plan_compaction(context, snapshot, full=full, buckets=buckets, live=live, trigger=trigger,
                            partitions=partitions)
    total, done = sum(f.file_size for _, _, unit in plans for f in unit.files), 0
    if progress is not None:
        progress(0, total)
    # the output is written under the newest schema of the context and its input files (a handle loaded before the
    # table's schema changed may compact files written after): never a column dropped or a type narrowed
    context = context.evolved(context.newest_schema([f for _, _, unit in plans for f in unit.files]))
    writer, reader = context.data_file_writer(), SplitRead(context)

    def rewrite(plan: tuple[Partition, int, compact_pick.CompactUnit]) -> CommitMessage:
        partition, bucket, unit = plan
        split = Split(snapshot.id if snapshot else 0, partition, bucket, unit.files)
        # a DELETE ordered by a sequence.field stays: a later-arriving row with a lower value must still lose to it
        run = reader.read_run(split, final=unit.drop_deletes and not context.options.merge_engine.sequence_fields)
        added = writer.write_run(run, partition, bucket, level=unit.output_level)
        log.debug("compacted %s files of %s/%s into %s at level %s", len(unit.files), partition, bucket,
                  len(added), unit.output_level)
        return CommitMessage(partition, bucket, context.options.bucket, tuple(added), unit.files)

    messages: list[CommitMessage] = []
    futures = [pool().submit(rewrite, p) for p in plans] if len(plans) > 1 else []
    try:
        for i, plan in enumerate(plans):
            messages.append(futures[i].result() if futures else rewrite(plan))
            done += sum(f.file_size for f in plan[2].files)
            if progress is not None:
                progress(done, total)
    except BaseException:
        wait(futures)  # no rewrite outlives the failure: the files of every finished one are deleted too
        messages += [f.result() for f in futures[len(messages):] if not f.cancelled() and f.exception() is None]
        delete_added_files(context, messages)
        raise
    return messages


def added_by(context: StoreContext, snapshot: Snapshot) -> list[CommitMessage]:
    """The files `snapshot` added (the ADD entries of its delta manifests), one message per (partition, bucket)."""
    grouped: dict[tuple[Partition, int], list[ManifestEntry]] = {}
    for meta in context.manifests.read_manifest_list(snapshot.delta_manifest_list):
        for e in context.manifests.read_manifest(meta.file_name):
            if e.kind == FileKind.ADD:
                grouped.setdefault((e.partition, e.bucket), []).append(e)
    return [CommitMessage(p, b, es[0].total_buckets, added=tuple(e.file for e in es))
            for (p, b), es in sorted(grouped.items())]


def delete_added_files(context: StoreContext, messages: Sequence[CommitMessage]) -> None:
    """Delete the files `messages` add (a commit that was never published); a failure to delete is logged only
    (what remains is an orphan, for `remove_orphan_files`)."""
    for m in messages:
        for f in m.added:
            path = context.data_file_path(m.partition, m.bucket, f.file_name)
            try:
                context.io.delete(path)
            except OSError as e:
                log.warning("could not delete %s of a failed commit: %s", path, e)
