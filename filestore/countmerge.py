"""Counts of a table without a primary key (FLIP-188 "DDL without Primary Key": the key is the whole row, the value
a count), merged so that a retraction of a row that is not there does nothing.

Semantics. A row's count starts at 0; each record, applied in sequence-number order, moves it to
`max(0, count + delta)` (a +I/+U record has delta +1, a -U/-D record -1). So `-D` of a missing row is ignored: it
does not hide a later `+I` of the same row, and a multiplicity is never negative. A record read back with count n
is n rows.

Why merges stay exact (associativity). The effect of a record is the function g_d(c) = max(0, c + d). The effect of
a run of records d_1..d_n is f(c) = max(m, c + S), with S = d_1 + ... + d_n, m = S - min(P_1..P_n) >= 0 and
P_k = d_1 + ... + d_k. Any such f is again one or two records:
- one record g_S when min(P) >= 0 (then m <= S, so f(c) = c + S for every count c >= 0) or when m == 0;
- two records g_{min(P)} then g_m otherwise (max(0, max(0, c + min P) + m) = max(m, c + S)), at the run's lowest
  and highest sequence numbers, so that they keep their place among older and newer records.
A merge of records of one row is therefore replaced by at most two records with the same effect on any count, and
can run over any contiguous range of sequence numbers: the runs of a bucket are such ranges (flush merges the
memtable, the newest; compaction merges a newest-first prefix of runs). A final merge (read, full compaction)
starts from 0 and leaves one record with the row's count, or nothing when it is 0. Files written before this rule
hold summed deltas that read the same way.
"""
from __future__ import annotations

import numpy as np


def fold_counts(
    seq: np.ndarray, delta: np.ndarray, first: np.ndarray, *, final: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold records sorted by (row, sequence number): `first` marks the first record of each row.

    Returns (input position to take the row's columns from, sequence number, count) of each output record, in
    output order (sorted by row, then sequence number). Vectorised over all rows.
    """
    n = len(delta)
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    delta = np.asarray(delta, dtype=np.int64)
    seq = np.asarray(seq, dtype=np.int64)
    starts = np.flatnonzero(first)
    ends = np.append(starts[1:], n) - 1
    running = np.cumsum(delta)
    before = np.concatenate(([0], running[starts[1:] - 1]))  # the running sum before each row's first record
    prefix = running - np.repeat(before, np.diff(np.append(starts, n)))
    total = prefix[ends]
    lowest = np.minimum.reduceat(prefix, starts)
    if final:
        count = total - np.minimum(lowest, 0)
        keep = count != 0
        return starts[keep], seq[ends][keep], count[keep]
    floor = total - lowest
    two = (lowest < 0) & (floor > 0)
    reps = np.where(two, 2, np.where(total != 0, 1, 0))
    rows = np.repeat(starts, reps)
    out_seq = np.repeat(seq[ends], reps)
    out_count = np.repeat(total, reps)
    pos = (np.cumsum(reps) - reps)[two]
    out_seq[pos] = seq[starts][two]
    out_count[pos] = lowest[two]
    out_count[pos + 1] = floor[two]
    return rows, out_seq, out_count
