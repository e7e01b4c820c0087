"""The one merge function (filestore.merge) against a plain dict replay, for random records split into runs.

Flush and compaction merge a subset of the runs non-finally; read merges the rest finally. Both must give what one
final merge of everything gives, which is what a dict replay in sequence order gives.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filestore.meta import ValueKind
from filestore.merge import (COUNT, KIND, SEQ, expand_counts, merge, merge_counts, merge_primary_key,
                             sorting_order)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ADD, DELETE = int(ValueKind.ADD), int(ValueKind.DELETE)

PK_SCHEMA = pa.schema([(SEQ, pa.int64()), (KIND, pa.int8()), ("k1", pa.int64()), ("k2", pa.string()),
                       ("v", pa.float64())])
COUNT_SCHEMA = pa.schema([(SEQ, pa.int64()), (KIND, pa.int8()), (COUNT, pa.int64()), ("a", pa.int64()),
                          ("b", pa.string())])

# (key1, key2, is_delete, value): a small key space so keys repeat often
pk_record = st.tuples(st.integers(-3, 3), st.sampled_from(["", "a", "b", "é"]), st.booleans(),
                      st.floats(allow_nan=False, width=32) | st.none())
# (a, b, is_delete): whole-row keys, nulls included
count_record = st.tuples(st.integers(0, 3) | st.none(), st.sampled_from(["x", "y"]) | st.none(), st.booleans())


def pk_table(records: list[tuple[Any, ...]], seqs: list[int]) -> pa.Table:
    return pa.table(
        {
            SEQ: seqs,
            KIND: [DELETE if d else ADD for _, _, d, _ in records],
            "k1": [r[0] for r in records],
            "k2": [r[1] for r in records],
            "v": [r[3] for r in records],
        },
        schema=PK_SCHEMA,
    )


def count_table(records: list[tuple[Any, ...]], seqs: list[int]) -> pa.Table:
    return pa.table(
        {
            SEQ: seqs,
            KIND: [ADD] * len(records),
            COUNT: [-1 if d else 1 for _, _, d in records],
            "a": [r[0] for r in records],
            "b": [r[1] for r in records],
        },
        schema=COUNT_SCHEMA,
    )


def pk_replay(records: list[tuple[Any, ...]], seqs: list[int]) -> dict[tuple[Any, Any], Any]:
    state: dict[tuple[Any, Any], Any] = {}
    for _seq, (k1, k2, is_delete, v) in sorted(zip(seqs, records), key=lambda x: x[0]):
        if is_delete:
            state.pop((k1, k2), None)
        else:
            state[(k1, k2)] = v
    return state


def count_replay(records: list[tuple[Any, ...]], seqs: list[int]) -> Counter[tuple[Any, Any]]:
    """In sequence order; a retraction of a row that is not there does nothing (filestore.countmerge)."""
    counts: Counter[tuple[Any, Any]] = Counter()
    for _seq, (a, b, is_delete) in sorted(zip(seqs, records), key=lambda x: x[0]):
        counts[(a, b)] = max(0, counts[(a, b)] + (-1 if is_delete else 1))
    return counts


def pk_rows(merged: pa.Table) -> dict[tuple[Any, Any], Any]:
    keys = list(zip(merged.column("k1").to_pylist(), merged.column("k2").to_pylist()))
    assert len(set(keys)) == len(keys), "a merge leaves one record per key"
    return dict(zip(keys, merged.column("v").to_pylist()))


def sort_key(row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is None, x) if not isinstance(x, tuple) else x for x in row)


@st.composite
def shuffled_runs(draw: st.DrawFn, record: st.SearchStrategy[tuple[Any, ...]]) -> tuple[list[Any], list[int], list[int]]:
    """Records with unique sequence numbers in random order, and cut points splitting them into runs."""
    records = draw(st.lists(record, max_size=40))
    seqs = draw(st.permutations(list(range(100, 100 + len(records)))))
    cuts = sorted(draw(st.lists(st.integers(0, len(records)), max_size=4)))
    return records, list(seqs), cuts


def runs_of(table: pa.Table, cuts: list[int]) -> list[pa.Table]:
    bounds = [0, *cuts, table.num_rows]
    return [table.slice(lo, hi - lo) for lo, hi in zip(bounds, bounds[1:])]


@SETTINGS
@given(shuffled_runs(pk_record))
def test_primary_key_merge_equals_dict_replay(case: tuple[list[Any], list[int], list[int]]) -> None:
    records, seqs, _ = case
    merged = merge_primary_key(pk_table(records, seqs), ["k1", "k2"], final=True)
    assert pk_rows(merged) == pk_replay(records, seqs)
    assert set(merged.column(KIND).to_pylist()) <= {ADD}
    keys = [sort_key(k) for k in zip(merged.column("k1").to_pylist(), merged.column("k2").to_pylist())]
    assert keys == sorted(keys), "the output is a sorted run"


@SETTINGS
@given(shuffled_runs(pk_record))
def test_primary_key_two_stage_merge_equals_one_final_merge(case: tuple[list[Any], list[int], list[int]]) -> None:
    records, seqs, cuts = case
    table = pk_table(records, seqs)
    keys = ["k1", "k2"]
    flushed = [merge(run, keys, primary_key=True, final=False) for run in runs_of(table, cuts)]
    for run in flushed:
        pk_rows(run)  # one record per key inside each flushed run, deletes kept
    staged = merge(pa.concat_tables(flushed), keys, primary_key=True, final=True)
    once = merge(table, keys, primary_key=True, final=True)
    assert staged.sort_by([("k1", "ascending"), ("k2", "ascending")]).equals(
        once.sort_by([("k1", "ascending"), ("k2", "ascending")])
    )
    assert pk_rows(staged) == pk_replay(records, seqs)


@SETTINGS
@given(shuffled_runs(pk_record))
def test_non_final_merge_keeps_the_winning_delete(case: tuple[list[Any], list[int], list[int]]) -> None:
    records, seqs, _ = case
    merged = merge_primary_key(pk_table(records, seqs), ["k1", "k2"], final=False)
    winners: dict[tuple[Any, Any], bool] = {}
    for _, (k1, k2, is_delete, _) in sorted(zip(seqs, records), key=lambda x: x[0]):
        winners[(k1, k2)] = is_delete
    got = dict(zip(zip(merged.column("k1").to_pylist(), merged.column("k2").to_pylist()),
                   (k == DELETE for k in merged.column(KIND).to_pylist())))
    assert got == winners


@SETTINGS
@given(shuffled_runs(count_record))
def test_count_merge_equals_multiset_replay(case: tuple[list[Any], list[int], list[int]]) -> None:
    records, seqs, _ = case
    merged = merge_counts(count_table(records, seqs), ["a", "b"], final=True)
    expected = count_replay(records, seqs)
    got = dict(zip(zip(merged.column("a").to_pylist(), merged.column("b").to_pylist()), merged.column(COUNT).to_pylist()))
    assert got == {k: n for k, n in expected.items() if n != 0}
    expanded = expand_counts(merged)
    rows = sorted((list(zip(expanded.column("a").to_pylist(), expanded.column("b").to_pylist()))), key=sort_key)
    assert rows == sorted((k for k, n in expected.items() for _ in range(n)), key=sort_key)


@st.composite
def merge_trees(draw: st.DrawFn) -> tuple[list[Any], list[list[int]]]:
    """Records in sequence order cut into runs, and a random order of merging adjacent runs (as an LSM does: each
    merge covers a contiguous range of sequence numbers)."""
    records = draw(st.lists(count_record, max_size=40))
    cuts = sorted(set(draw(st.lists(st.integers(1, max(1, len(records) - 1)), max_size=6))))
    bounds = [0, *[c for c in cuts if 0 < c < len(records)], len(records)]
    merges = draw(st.lists(st.integers(0, 10), max_size=8))
    return records, [list(range(lo, hi)) for lo, hi in zip(bounds, bounds[1:])] + [merges]  # type: ignore[list-item]


@SETTINGS
@given(merge_trees(), st.randoms(use_true_random=False))
def test_count_merges_of_adjacent_runs_in_any_order_equal_one_final_merge(
    case: tuple[list[Any], list[list[int]]], rnd: Any
) -> None:
    records, groups = case
    merges, spans = groups[-1], groups[:-1]
    seqs = [100 + i for i in range(len(records))]
    table = count_table(records, seqs)
    runs = [merge(table.take(pa.array(span, pa.int64())), ["a", "b"], primary_key=False, final=False)
            for span in spans]
    for run in runs:
        counts = run.column(COUNT).to_pylist()
        assert 0 not in counts, "zero deltas carry no information and are dropped"
        keys = list(zip(run.column("a").to_pylist(), run.column("b").to_pylist()))
        assert max(Counter(keys).values(), default=0) <= 2, "at most two records per row"
    for choice in merges:  # merge two adjacent runs, non-finally, as a partial compaction does
        if len(runs) < 2:
            break
        i = choice % (len(runs) - 1)
        both = pa.concat_tables([runs[i], runs[i + 1]])
        both = both.take(pa.array(rnd.sample(range(both.num_rows), both.num_rows), pa.int64()))  # order-blind
        runs[i:i + 2] = [merge(both, ["a", "b"], primary_key=False, final=False)]
    staged = expand_counts(merge(pa.concat_tables([table.schema.empty_table(), *runs]), ["a", "b"],
                                 primary_key=False, final=True))
    expected = count_replay(records, seqs)
    rows = sorted(zip(staged.column("a").to_pylist(), staged.column("b").to_pylist()), key=sort_key)
    assert rows == sorted((k for k, n in expected.items() for _ in range(n)), key=sort_key)


def test_a_retraction_of_a_missing_row_does_not_hide_a_later_insert() -> None:
    records = [(1, "x", True), (1, "x", True), (2, "y", False), (2, "y", True), (1, "x", False)]
    for final in (False, True):
        merged = merge_counts(count_table(records, [1, 2, 3, 4, 5]), ["a", "b"], final=final)
        assert expand_counts(merge_counts(merged, ["a", "b"], final=True)).select(["a", "b"]).to_pylist() == [
            {"a": 1, "b": "x"}]
    # an older run holding the row twice: the two retractions do count then, the insert brings one back
    older = count_table([(1, "x", False), (1, "x", False)], [-1, 0])
    newer = merge_counts(count_table(records, [1, 2, 3, 4, 5]), ["a", "b"], final=False)
    assert newer.select(["a", "b", COUNT]).to_pylist() == [{"a": 1, "b": "x", COUNT: -2}, {"a": 1, "b": "x", COUNT: 1}]
    merged = merge_counts(pa.concat_tables([older, newer]), ["a", "b"], final=True)
    assert merged.select(["a", "b", COUNT]).to_pylist() == [{"a": 1, "b": "x", COUNT: 1}]


def test_nulls_in_whole_row_keys_are_one_key() -> None:
    records = [(None, None, False), (None, None, False), (None, "x", False), (None, None, True)]
    merged = merge_counts(count_table(records, [1, 2, 3, 4]), ["a", "b"], final=True)
    assert sorted(merged.select(["a", "b", COUNT]).to_pylist(), key=lambda r: str(r["b"])) == [
        {"a": None, "b": None, COUNT: 1},
        {"a": None, "b": "x", COUNT: 1},
    ]


def test_empty_input_merges_to_empty() -> None:
    assert merge(pk_table([], []), ["k1", "k2"], primary_key=True, final=True).num_rows == 0
    assert merge(count_table([], []), ["a", "b"], primary_key=False, final=True).num_rows == 0


@SETTINGS
@given(st.lists(st.tuples(st.integers(-(2**31), 2**31 - 1), st.booleans()), max_size=40),
       st.sampled_from([pa.int64(), pa.int32(), pa.date32(), pa.timestamp("us"), pa.int8()]), st.booleans(),
       st.randoms(use_true_random=False))
def test_one_integer_key_merges_like_the_replay(records: list[tuple[int, bool]], key_type: pa.DataType,
                                                 final: bool, rnd: Any) -> None:
    """One integer-like key column (numpy's sort, with or without repeated keys): the newest record
    of each key, in key order; non-final keeps winning deletes."""
    storage = {pa.date32(): pa.int32(), pa.int8(): pa.int8(), pa.int32(): pa.int32()}.get(key_type, pa.int64())
    if key_type == pa.int8() or len(records) % 3 == 0:
        records = [(k % 7, d) for k, d in records]  # keys repeat
    seqs = list(range(len(records)))
    rnd.shuffle(seqs)
    kinds = [DELETE if d else ADD for _, d in records]
    table = pa.table({SEQ: pa.array(seqs, pa.int64()), KIND: pa.array(kinds, pa.int8()),
                      "k": pa.array([k for k, _ in records], storage).cast(key_type)})
    newest: dict[int, tuple[int, bool]] = {}
    for (k, d), s in zip(records, seqs):
        if k not in newest or s > newest[k][0]:
            newest[k] = (s, d)
    expected = [(k, s) for k, (s, d) in sorted(newest.items()) if not (final and d)]
    merged = merge_primary_key(table, ["k"], final=final)
    assert list(zip(merged.column("k").cast(storage).to_pylist(), merged.column(SEQ).to_pylist())) == expected


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(2, 6000), st.sampled_from([10, 2**31, 2**62, 2**64]),
       st.integers(1, 8), st.sampled_from([np.int64, np.int32, np.int8]))
def test_sorting_order_sorts_runs_and_random_keys_of_any_range(seed: int, n: int, span: int, runs: int,
                                                                dtype: Any) -> None:
    """`sorting_order` (the integer key sort of flushes, reads and compactions) is a permutation that sorts the
    values, whether they are a few sorted runs or in random order, of a narrow or the full int64 range."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    lo = max(info.min, -(span // 2))
    hi = min(info.max, lo + span - 1)
    values = rng.integers(lo, hi, n, dtype=np.int64, endpoint=True)
    if seed % 2:  # concatenated sorted runs, as a merge of files reads them
        values = np.concatenate([np.sort(part) for part in np.array_split(values, runs)])
    values = values.astype(dtype)
    order = sorting_order(values)
    assert np.array_equal(np.sort(order), np.arange(n))
    assert np.array_equal(values[order], np.sort(values))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(1500, 5000), st.sampled_from([50, 2**40, 2**63]), st.booleans())
def test_integer_key_merge_of_random_keys_is_the_general_merge(seed: int, n: int, span: int, final: bool) -> None:
    """Enough keys in random order to take the packed sort: the same winners, in the same order, as the general
    merge on two key columns (a constant second column makes it the same key order)."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(-(span // 2), span // 2 - 1, n, dtype=np.int64)
    table = pa.table({SEQ: pa.array(rng.permutation(n), pa.int64()),
                      KIND: pa.array(rng.choice([ADD, DELETE], n, p=[0.8, 0.2]), pa.int8()),
                      "k": pa.array(keys), "c": pa.array(np.zeros(n, dtype=np.int8))})
    assert merge_primary_key(table, ["k"], final=final).equals(merge_primary_key(table, ["k", "c"], final=final))
