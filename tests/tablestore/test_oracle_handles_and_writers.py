"""Oracle property tests of issue 11's identity and concurrency cases, against the dict replay of test_oracle.

- Stale handles: random writes and compactions through several handles, while another catalog drops the table
  and creates it again under the same name (same schema: the case where stale rows would appear silently). A
  handle of a dropped generation fails with TableDroppedError and changes nothing; the table always reads as the
  replay of its own generation's writes, and a dropped table's directory is not recreated.
- Four writers: four processes apply random changelogs (keys overlapping across writers, so they collide on
  buckets) at full speed. Each `Table.write` reports the snapshot it committed; the final table, and the table
  at every retained APPEND snapshot, must equal the replay of the writes in snapshot order. That holds only if a
  bucket's sequence numbers follow snapshot order (a write re-planned after another writer committed to its
  buckets), for upserts and for counts alike.
"""
from __future__ import annotations

import multiprocessing
import tempfile
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Union

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_oracle import Oracle, Record, as_table, read_rows, record, schema_of

import tablestore

# -- stale handles ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    handle: int  # an index into the handles opened so far (modulo their number)
    records: list[Record]


@dataclass(frozen=True)
class Compact:
    handle: int
    full: bool


@dataclass(frozen=True)
class OpenHandle:
    """Another handle of the table as it is now (`Catalog.get_table`)."""


@dataclass(frozen=True)
class Drop:
    recreate: bool  # drop_table, then (or not) create_table again under the same name, from another catalog


HandleOp = Union[Write, Compact, OpenHandle, Drop]
handle_op = st.one_of(
    st.builds(Write, st.integers(0, 7), st.lists(record, min_size=1, max_size=12)),
    st.builds(Write, st.integers(0, 7), st.lists(record, min_size=1, max_size=12)),
    st.builds(Compact, st.integers(0, 7), st.booleans()),
    st.just(OpenHandle()),
    st.builds(Drop, st.sampled_from([True, True, False])),
)


def create(wh: str, pk: bool, bucket: int) -> tablestore.Table:
    return tablestore.Catalog(wh).create_table(
        "db.t", schema=schema_of(pk, float_keys=False), primary_key=["id"] if pk else None,
        options={"bucket": str(bucket), "write-buffer-size": "1 kb", "num-sorted-run.compaction-trigger": "2"})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pk=st.booleans(), bucket=st.sampled_from([1, 2]), ops=st.lists(handle_op, min_size=1, max_size=10))
def test_stale_handles_never_touch_the_table_created_again(pk: bool, bucket: int, ops: list[HandleOp]) -> None:
    with tempfile.TemporaryDirectory() as wh:
        tablestore.Catalog(wh).create_database("db")
        handles: list[tuple[int, tablestore.Table]] = [(0, create(wh, pk, bucket))]  # (generation, handle)
        generation, exists = 0, True
        oracle = Oracle(pk, partitioned=False, float_keys=False)
        for step, op in enumerate(ops):
            if isinstance(op, OpenHandle):
                if exists:
                    handles.append((generation, tablestore.Catalog(wh).get_table("db.t")))
            elif isinstance(op, Drop):
                other = tablestore.Catalog(wh)
                if exists:
                    other.drop_table("db.t")
                    exists = False
                if op.recreate:
                    generation += 1
                    handles.append((generation, create(wh, pk, bucket)))
                    exists = True
                    oracle = Oracle(pk, partitioned=False, float_keys=False)
            else:
                gen, handle = handles[op.handle % len(handles)]
                current = exists and gen == generation
                records = oracle.well_formed(op.records) if isinstance(op, Write) else []
                try:
                    if isinstance(op, Write):
                        handle.write(as_table(records))
                    else:
                        handle.compact(full=op.full)
                except tablestore.TableDroppedError as e:
                    assert not current, (step, op, e)
                    assert "'db.t'" in str(e)
                else:
                    assert current, (step, op, "a handle of a dropped table wrote")
                    oracle.apply(records)
            table_dir = Path(wh) / "db.db" / "t"
            assert table_dir.exists() == exists, step  # a stale write recreates nothing
            if exists:
                assert read_rows(tablestore.Catalog(wh).get_table("db.t")) == oracle.state(), (step, op)


# -- four concurrent writer processes -----------------------------------------------------------------------------

WRITERS = 4
writer_records = st.lists(record, min_size=1, max_size=10)


def _write_all(warehouse: str, writes: list[list[Record]]) -> list[int | None]:
    """One writer process: its writes in order, and the snapshot each committed."""
    t = tablestore.Catalog(warehouse).get_table("db.t")
    return [t.write(as_table(records)) for records in writes]


@pytest.fixture(scope="module")
def pool() -> Iterator[ProcessPoolExecutor]:
    with ProcessPoolExecutor(WRITERS, mp_context=multiprocessing.get_context("spawn")) as p:
        list(p.map(_import_only, range(WRITERS)))  # pay the imports once, before the examples
        yield p


def _import_only(_: int) -> None:
    pass


@settings(max_examples=10, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(pk=st.booleans(), bucket=st.sampled_from([1, 3]),
       writes=st.lists(st.lists(writer_records, min_size=2, max_size=6), min_size=WRITERS, max_size=WRITERS))
def test_four_writers_equal_the_replay_in_snapshot_order(pool: ProcessPoolExecutor, pk: bool, bucket: int,
                                                         writes: list[list[list[Record]]]) -> None:
    with tempfile.TemporaryDirectory() as wh:
        cat = tablestore.Catalog(wh)
        cat.create_database("db")
        oracle = Oracle(pk, partitioned=False, float_keys=False)
        cat.create_table("db.t", schema=schema_of(pk, float_keys=False), primary_key=["id"] if pk else None,
                         options={"bucket": str(bucket), "num-sorted-run.compaction-trigger": "3",
                                  "commit.min-retry-wait": "5 ms", "commit.max-retry-wait": "200 ms",
                                  "snapshot.num-retained.min": "1000", "snapshot.num-retained.max": "1000"})
        writes = [[oracle.well_formed(records) for records in mine] for mine in writes]
        committed = list(pool.map(_write_all, [wh] * WRITERS, writes))
        by_snapshot: dict[int, list[Record]] = {}
        nothing: list[list[Record]] = []  # writes that committed nothing (write() returned None)
        for mine, ids in zip(writes, committed):
            assert len(ids) == len(mine)  # every write of every writer returned
            for records, sid in zip(mine, ids):
                if sid is None:
                    nothing.append(records)
                else:
                    assert sid not in by_snapshot, sid
                    by_snapshot[sid] = records
        t = cat.get_table("db.t")
        appends = {s.id for s in t.snapshots() if s.kind == "APPEND"}
        assert appends == set(by_snapshot)
        for sid in sorted(by_snapshot):
            oracle.apply(by_snapshot[sid])
            assert read_rows(t, snapshot_id=sid) == oracle.state(), sid
        assert read_rows(t) == oracle.state()
        for records in nothing:  # e.g. +I then -U of one row: a no-op from any state, so it needs no place
            for base in (Oracle(pk, partitioned=False, float_keys=False), oracle):
                before = base.state()
                base.apply(records)
                assert base.state() == before, records
