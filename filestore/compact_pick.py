"""Universal compaction picking (FLIP-188 "Compaction"; RocksDB's universal style). A pure function of the
sorted runs of one bucket: no IO, so it is tested table-driven and with properties.

Runs are ordered newest first: every level-0 file is a run of its own (newest = highest sequence numbers), then one
run per non-empty level 1..max. `pick` returns the runs to merge (always a newest-first prefix) and the output level,
in this priority:
1. size amplification: size(all runs but the oldest) * 100 > max_size_amp * size(oldest) -> merge everything;
2. size ratio: grow a prefix while size(prefix) * (100 + size_ratio) / 100 >= size(next run); merge if >= 2 runs;
3. run count: more runs than the trigger -> merge the newest (count - trigger + 1) runs, grown by size ratio.
Steps 1 and 2 only apply once the bucket has at least `trigger` runs. The output never goes to level 0: it lands on
the level just above the first run left out (or on the max level when nothing is left out). Only a merge of every
run may drop deletes (nothing older remains below it).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from filestore.meta import DataFileMeta


@dataclass(frozen=True)
class SortedRun:
    level: int
    files: tuple[DataFileMeta, ...]

    @property
    def size(self) -> int:
        return sum(f.file_size for f in self.files)


@dataclass(frozen=True)
class CompactUnit:
    output_level: int
    runs: tuple[SortedRun, ...]
    drop_deletes: bool

    @property
    def files(self) -> tuple[DataFileMeta, ...]:
        return tuple(f for r in self.runs for f in r.files)


def sorted_runs(files: Sequence[DataFileMeta]) -> list[SortedRun]:
    """The runs of a bucket, newest first."""
    level0 = sorted((f for f in files if f.level == 0), key=lambda f: f.max_sequence_number, reverse=True)
    runs = [SortedRun(0, (f,)) for f in level0]
    for level in sorted({f.level for f in files if f.level > 0}):
        runs.append(SortedRun(level, tuple(sorted((f for f in files if f.level == level), key=lambda f: f.min_key))))
    return runs


def _unit(runs: Sequence[SortedRun], max_level: int, count: int) -> CompactUnit:
    if count >= len(runs):
        return CompactUnit(max_level, tuple(runs), drop_deletes=True)
    output = max(0, runs[count].level - 1)
    while output == 0 and count < len(runs):
        nxt = runs[count]
        count += 1
        if nxt.level != 0:
            output = nxt.level
    if count >= len(runs):
        return CompactUnit(max_level, tuple(runs), drop_deletes=True)
    return CompactUnit(output, tuple(runs[:count]), drop_deletes=False)


def _grow_by_size_ratio(runs: Sequence[SortedRun], count: int, size_ratio: int) -> int:
    size = sum(r.size for r in runs[:count])
    while count < len(runs) and size * (100 + size_ratio) / 100 >= runs[count].size:
        size += runs[count].size
        count += 1
    return count


def pick(
    runs: Sequence[SortedRun], *, num_levels: int, trigger: int, max_size_amp: int, size_ratio: int
) -> CompactUnit | None:
    max_level = num_levels - 1
    if len(runs) < max(2, trigger):
        return None
    newer = sum(r.size for r in runs[:-1])
    if newer * 100 > max_size_amp * runs[-1].size:
        return CompactUnit(max_level, tuple(runs), drop_deletes=True)
    count = _grow_by_size_ratio(runs, 1, size_ratio)
    if count > 1:
        return _unit(runs, max_level, count)
    if len(runs) > trigger:
        return _unit(runs, max_level, _grow_by_size_ratio(runs, len(runs) - trigger + 1, size_ratio))
    return None


def full(runs: Sequence[SortedRun], *, num_levels: int) -> CompactUnit | None:
    """Merge every run into the max level (manual full compaction); None when already one run there."""
    if not runs or (len(runs) == 1 and runs[0].level == num_levels - 1):
        return None
    return CompactUnit(num_levels - 1, tuple(runs), drop_deletes=True)
