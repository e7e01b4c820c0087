"""A read's merge without sequence numbers (filestore.merge.newest_run_winners, used by filestore.read for a
primary-key table with one integer key whose runs have disjoint sequence ranges) gives exactly what the one merge
function gives: the same rows in the same (key) order, for random runs with deletes, keys repeated across runs,
empty runs and a single run; and a read or a compaction's merge through it equals merging every record."""
from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from filestore import compact_pick
from filestore.compact import compact
from filestore.merge import KIND, SEQ, merge, newest_run_winners
from filestore.meta import CommitKind, DataFileMeta, ValueKind
from filestore.read import _runs_oldest_first
from filestore.store import FileStore

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ADD, DELETE = int(ValueKind.ADD), int(ValueKind.DELETE)

# a run: unique keys (a small key space, so keys repeat across runs), each with is_delete and a value
run = st.dictionaries(st.integers(-20, 20), st.tuples(st.booleans(), st.integers(-5, 5)), max_size=25)


def records_of(runs: list[dict[int, tuple[bool, int]]], rnd: Any) -> pa.Table:
    """The runs concatenated oldest first, each sorted by key, each with sequence numbers above the previous run's
    (shuffled within the run: a compaction's output mixes its inputs' numbers)."""
    keys, seqs, kinds, values = [], [], [], []
    base = 100
    for r in runs:
        numbers = list(range(base, base + len(r)))
        rnd.shuffle(numbers)
        base += len(r) + rnd.randint(0, 3)
        for (k, (d, v)), s in zip(sorted(r.items()), numbers):
            keys.append(k)
            seqs.append(s)
            kinds.append(DELETE if d else ADD)
            values.append(v)
    return pa.table({SEQ: pa.array(seqs, pa.int64()), KIND: pa.array(kinds, pa.int8()),
                     "k": pa.array(keys, pa.int64()), "v": pa.array(values, pa.int64())})


@SETTINGS
@given(st.lists(run, max_size=6), st.booleans(), st.randoms(use_true_random=False))
def test_newest_run_winners_are_the_merge(runs: list[dict[int, tuple[bool, int]]], final: bool, rnd: Any) -> None:
    records = records_of(runs, rnd)
    winners = newest_run_winners(records.column("k").to_numpy(), [len(r) for r in runs],
                                 records.column(KIND).to_numpy(), final=final)
    assert winners is not None
    got = records.take(pa.array(winners, pa.int64()))
    assert got.equals(merge(records, ["k"], primary_key=True, final=final))


@SETTINGS
@given(st.lists(run, min_size=1, max_size=4), st.randoms(use_true_random=False))
def test_without_kinds_every_record_is_an_add(runs: list[dict[int, tuple[bool, int]]], rnd: Any) -> None:
    runs = [{k: (False, v) for k, (_, v) in r.items()} for r in runs]
    records = records_of(runs, rnd)
    winners = newest_run_winners(records.column("k").to_numpy(), [len(r) for r in runs], None, final=True)
    assert winners is not None
    assert records.take(pa.array(winners, pa.int64())).equals(merge(records, ["k"], primary_key=True, final=True))


@pytest.mark.parametrize("keys", [[1, 1, 2], [3, 2], [1, 2, 2, 5]])
def test_a_run_whose_keys_are_not_strictly_increasing_is_left_to_the_general_merge(keys: list[int]) -> None:
    assert newest_run_winners(np.array([0, *keys], np.int64), [1, len(keys)], None, final=True) is None


def meta(name: str, level: int, seqs: tuple[int, int]) -> DataFileMeta:
    return DataFileMeta(name, 1, 1, b"", b"", seqs[0], seqs[1], level, 0, 0)


def test_runs_are_ordered_by_sequence_only_when_their_ranges_are_disjoint() -> None:
    files = [meta("a", 0, (9, 9)), meta("b", 0, (7, 8)), meta("c", 3, (4, 6)), meta("d", 3, (0, 3)),
             meta("e", 5, (1, 2))]
    assert _runs_oldest_first(compact_pick.sorted_runs(files)) is None  # level 5 [1, 2] inside level 3 [0, 6]
    disjoint = [f for f in files if f.file_name != "e"]
    ordered = _runs_oldest_first(compact_pick.sorted_runs(disjoint))
    assert ordered is not None and [{f.file_name for f in r.files} for r in ordered] == [{"c", "d"}, {"b"}, {"a"}]


SCHEMA = pa.schema([pa.field("k", pa.int32(), nullable=False), ("s", pa.string()), ("v", pa.float64())])
# a write: rows (k, s, v, is_delete)
row = st.tuples(st.integers(0, 60), st.sampled_from(["a", "b", ""]), st.floats(allow_nan=False, width=32),
                st.booleans())
writes = st.lists(st.lists(row, min_size=1, max_size=50), min_size=2, max_size=6)


def apply(store: FileStore, batch: list[tuple[int, str, float, bool]]) -> None:
    data = pa.table({"k": [r[0] for r in batch], "s": [r[1] for r in batch], "v": [r[2] for r in batch]},
                    schema=SCHEMA)
    kinds = pa.array([DELETE if r[3] else ADD for r in batch], pa.int8())
    w = store.new_write()
    w.write(data, kinds.to_numpy())
    store.new_commit().commit(w.prepare_commit(), identifier=1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(writes, st.integers(0, 5), st.sampled_from([None, (pc.field("k") >= 10) & (pc.field("k") < 30)]),
       st.sampled_from([1, 2]))
def test_a_read_of_several_runs_equals_merging_every_record(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple[int, str, float, bool]]], compact_after: int,
    filter: pc.Expression | None, bucket: int,
) -> None:
    cat = catalog.Catalog(str(tmp_path_factory.mktemp("t")))
    cat.create_database("db", ignore_if_exists=True)
    store = cat.create_table("db.t", SCHEMA, ["k"], None, {"bucket": str(bucket)}).store
    for i, batch in enumerate(batches):
        apply(store, batch)
        if i == min(compact_after, len(batches) - 2):  # an older run on the max level below newer level-0 files
            messages = compact(store.context, store.snapshots.latest(), full=True)
            if messages:
                store.new_commit().commit(messages, identifier=2, kind=CommitKind.COMPACT)
    splits = store.new_scan().plan(store.snapshots.latest(), filter)
    read = store.new_read(filter=filter)
    for split in splits:  # the runs of an LSM bucket have disjoint sequence ranges: the path under test is taken
        assert len(compact_pick.sorted_runs(split.files)) < 2 or read._merge_by_run_order(split, filter, SCHEMA.names, final=True) is not None
    want = []
    for split in splits:
        for final in (False, True):  # what compaction writes: system columns included
            assert read.read_run(split, final=final).equals(
                merge(read.read_records(split), ["k"], primary_key=True, final=final))
        merged = merge(read.read_records(split), ["k"], primary_key=True, final=True)
        want.append(merged if filter is None else merged.filter(filter))
    expected = pa.concat_tables(want).select(SCHEMA.names).cast(SCHEMA) if want else SCHEMA.empty_table()
    assert read.to_table(splits).equals(expected)
