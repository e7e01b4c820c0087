"""The vectorised changelog normalizer against the per-row one (the oracle): same changes out, for any events
split into any batches, with composite keys, key-only deletes, duplicates and `_row_kind` anywhere."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablestore.materializer import ChangelogNormalizer, InvalidRowKindError
from tablestore.materializer.normalize_arrow import ArrowChangelogNormalizer

SCHEMA = pa.schema([("k1", pa.int64()), ("k2", pa.string()), ("v", pa.string()), ("n", pa.float64())])
Event = tuple[str, int, str, Any, Any]

event = st.tuples(st.sampled_from(["+I", "+U", "+U", "-U", "-D"]), st.integers(0, 4), st.sampled_from(["a", "b"]),
                  st.sampled_from(["x", "y", None]), st.sampled_from([1.0, 2.5, None, float("nan"), -0.0, 0.0]))


def as_table(events: list[Event], kind_first: bool) -> pa.Table:
    columns = {"k1": pa.array([e[1] for e in events], pa.int64()), "k2": pa.array([e[2] for e in events], pa.string()),
               "v": pa.array([e[3] for e in events], pa.string()), "n": pa.array([e[4] for e in events], pa.float64())}
    kinds = pa.array([e[0] for e in events], pa.string())
    if kind_first:
        return pa.table({"_row_kind": kinds, **columns})
    return pa.table({**columns, "_row_kind": kinds})


def changes(table: pa.Table) -> list[tuple[Any, ...]]:
    names = ["_row_kind", *SCHEMA.names]
    return [tuple(repr(r[n]) for n in names) for r in table.to_pylist()]  # repr: nan == nan, -0.0 != 0.0


@settings(max_examples=300, deadline=None)
@given(events=st.lists(event, max_size=60), cuts=st.lists(st.integers(0, 60), max_size=5), gub=st.booleans(),
       kind_first=st.booleans())
def test_matches_the_per_row_normalizer_for_any_batching(events: list[Event], cuts: list[int], gub: bool,
                                                        kind_first: bool) -> None:
    oracle = ChangelogNormalizer(key=[0, 1], generate_update_before=gub, row_types=SCHEMA.types)
    expected: list[tuple[Any, ...]] = []
    for kind, *row in events:
        for out_kind, out_row in oracle.process(kind, row):
            expected.append(tuple(repr(v) for v in (out_kind, *out_row)))
    fast = ArrowChangelogNormalizer(SCHEMA, ["k1", "k2"], generate_update_before=gub)
    got: list[tuple[Any, ...]] = []
    bounds = sorted({0, len(events), *(c for c in cuts if c <= len(events))})
    for lo, hi in zip(bounds, bounds[1:]):
        table = as_table(events[lo:hi], kind_first)
        out = fast.process_batch(table)
        assert out.schema == table.schema
        got.extend(changes(out))
    assert got == expected
    assert len(fast) == sum(1 for k1 in range(5) for k2 in "ab" if oracle.current((k1, k2)) is not None)


def test_a_key_only_delete_emits_the_full_stored_row() -> None:
    n = ArrowChangelogNormalizer(SCHEMA, ["k1"])
    n.process_batch(as_table([("+U", 1, "a", "x", 1.0)], True))
    out = n.process_batch(as_table([("-D", 1, None, None, None), ("-D", 1, None, None, None)], True))  # type: ignore[list-item]
    assert out.to_pylist() == [{"_row_kind": "-D", "k1": 1, "k2": "a", "v": "x", "n": 1.0}]


def test_the_store_is_rebuilt_without_dead_rows() -> None:
    n = ArrowChangelogNormalizer(pa.schema([("k", pa.int64()), ("v", pa.int64())]), ["k"])
    for i in range(40):
        n.process_batch(pa.table({"_row_kind": ["+U"] * 5000, "k": pa.array(range(5000), pa.int64()),
                                  "v": pa.array([i] * 5000, pa.int64())}))
    assert len(n) == 5000 and n._stored <= 2 * 65536
    out = n.process_batch(pa.table({"_row_kind": ["-D"], "k": pa.array([7], pa.int64()),
                                    "v": pa.array([None], pa.int64())}))
    assert out.to_pylist() == [{"_row_kind": "-D", "k": 7, "v": 39}]


def test_bad_row_kinds_are_the_tablestore_error() -> None:
    n = ArrowChangelogNormalizer(SCHEMA, ["k1"])
    with pytest.raises(InvalidRowKindError, match="'X'"):
        n.process_batch(pa.table({"_row_kind": ["+I", "X"], "k1": [1, 2], "k2": ["a", "b"], "v": ["x", "y"],
                                  "n": [1.0, 2.0]}))


@settings(max_examples=100, deadline=None)
@given(state=st.lists(event, max_size=20), events=st.lists(event, max_size=40))
def test_a_seeded_state_is_the_state_its_rows_leave_as_inserts(state: list[Event], events: list[Event]) -> None:
    rows = {(e[1], e[2]): ("+I", *e[1:]) for e in state}  # one row per key, as a table's rows at a snapshot
    seed = as_table(list(rows.values()), True)  # type: ignore[arg-type]
    fed = ArrowChangelogNormalizer(SCHEMA, ["k1", "k2"])
    fed.process_batch(seed)
    seeded = ArrowChangelogNormalizer(SCHEMA, ["k1", "k2"])
    seeded.process_batch(as_table([("+I", 9, "z", "old", 1.0)], True))  # replaced by the seed
    seeded.seed(seed.drop_columns(["_row_kind"]))
    assert len(seeded) == len(fed) == len(rows)
    batch = as_table(events, True)
    assert changes(seeded.process_batch(batch)) == changes(fed.process_batch(batch))
