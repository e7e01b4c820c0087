"""The read paths agree: a bucket that is one sorted run is read without a merge, a filter may be pushed to the
Parquet reader (row groups skipped), splits are read in parallel; each must give exactly what merging every record
and filtering afterwards gives (`merge` + `filter`, the definition). Also: the merge's shortcut for records already
sorted by a unique key equals its general path."""
from __future__ import annotations

import random

import pytest
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from filestore.merge import KIND, SEQ, merge, merge_primary_key, strictly_sorted
from filestore.meta import ValueKind
from filestore.store import FileStore

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("s", pa.string(), nullable=False),
                    ("v", pa.float64())])

# a write: rows (k, s, v, is_delete); small key spaces so keys repeat across writes
row = st.tuples(st.integers(0, 40), st.sampled_from(["a", "b"]), st.floats(allow_nan=False, width=32),
                st.booleans())
writes = st.lists(st.lists(row, min_size=1, max_size=40), min_size=1, max_size=5)
filters = st.sampled_from([
    None,
    (pc.field("k") >= 10) & (pc.field("k") < 25),   # key-only: pushed down in every case
    pc.field("s") == "a",                           # a key column too (the key is (k, s))
    pc.field("v") > 0,                              # a value column: pushed only to a single run
])


def make_store(tmp: str, bucket: int) -> FileStore:
    cat = catalog.Catalog(tmp)
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", SCHEMA, ["k", "s"], None, {"bucket": str(bucket)}).store


def apply(store: FileStore, batch: list[tuple[int, str, float, bool]]) -> None:
    data = pa.table({"k": [r[0] for r in batch], "s": [r[1] for r in batch], "v": [r[2] for r in batch]},
                    schema=SCHEMA)
    kinds = pa.array([int(ValueKind.DELETE) if r[3] else int(ValueKind.ADD) for r in batch], pa.int8())
    w = store.new_write()
    w.write(data, kinds.to_numpy())
    store.new_commit().commit(w.prepare_commit(), identifier=1)


def reference(store: FileStore, filter: pc.Expression | None) -> pa.Table:
    """Merge every record of each bucket, then filter: the definition of a read."""
    snapshot = store.snapshots.latest()
    read = store.new_read()
    out = []
    for split in store.new_scan().plan(snapshot):
        merged = merge(read.read_records(split), ["k", "s"], primary_key=True, final=True)
        out.append(merged if filter is None else merged.filter(filter))
    return pa.concat_tables(out).select(SCHEMA.names) if out else SCHEMA.empty_table()


@SETTINGS
@given(writes, filters, st.sampled_from([1, 3]), st.booleans())
def test_every_read_path_equals_merge_then_filter(
    tmp_path_factory: pytest.TempPathFactory, batches: list[list[tuple[int, str, float, bool]]],
    filter: pc.Expression | None, bucket: int, compact_first: bool,
) -> None:
    from filestore.compact import compact
    from filestore.meta import CommitKind

    store = make_store(str(tmp_path_factory.mktemp("t")), bucket)
    for batch in batches:
        apply(store, batch)
    if compact_first:  # one run per bucket: the no-merge path
        messages = compact(store.context, store.snapshots.latest(), full=True)
        if messages:
            store.new_commit().commit(messages, identifier=2, kind=CommitKind.COMPACT)
    snapshot = store.snapshots.latest()
    splits = store.new_scan().plan(snapshot, filter)
    got = store.new_read(filter=filter).to_table(splits)
    want = reference(store, filter)
    assert got.to_pylist() == want.to_pylist()  # same rows in the same order (splits in bucket order)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-5, 5), st.sampled_from(["", "a", "b"])), unique=True, max_size=30),
       st.randoms())
def test_sorted_unique_records_are_their_own_merge(keys: list[tuple[int, str]], rnd: random.Random) -> None:
    keys = sorted(keys)
    records = pa.table({SEQ: pa.array(range(len(keys)), pa.int64()), KIND: pa.array([0] * len(keys), pa.int8()),
                        "k1": pa.array([k[0] for k in keys], pa.int64()), "k2": pa.array([k[1] for k in keys])})
    assert strictly_sorted(records, ["k1", "k2"])
    shuffled = records.take(pa.array(rnd.sample(range(len(keys)), len(keys)), pa.int64()))
    for final in (False, True):
        fast = merge_primary_key(records, ["k1", "k2"], final=final)
        general = merge_primary_key(shuffled, ["k1", "k2"], final=final)
        assert fast.to_pylist() == general.to_pylist()
