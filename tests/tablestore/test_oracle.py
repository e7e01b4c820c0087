"""Oracle property test: random sequences of writes (changelogs with +I/-U/+U/-D), multi-flush commits,
overwrites (whole, static, dynamic) and compactions, on primary-key and count tables with one or several buckets and
partitions, primary-key tables with and without deletion vectors, against a plain dict replay. After every step the table reads as the oracle, and time travel to every
earlier snapshot reads as the oracle did then.

Keys that are hard to match take part: with `float_keys` the id is a float64 where 11 is written as -0.0 (the same
key as 0.0) and 12 as NaN (a key equal to itself); the partition values include the string "__DEFAULT_PARTITION__"
and, for tables without a primary key, null. Retractions of rows that are not there are kept in the changelogs of
tables without a primary key: they do nothing (filestore.countmerge), also across compactions. Stale handles of a
table dropped and created again, and four concurrent writer processes, are in test_oracle_handles_and_writers.py.
"""
from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass
from typing import Any, Union

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
import tablestore

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PARTITIONS = ["x", "y", "__DEFAULT_PARTITION__"]
Record = tuple[str, int, Union[str, None], Union[int, None]]  # (row kind, id, p, v)
Row = tuple[int, Union[str, None], Union[int, None]]
NEG_ZERO, NAN = 11, 12  # ids written as -0.0 and NaN when the id is a float


def schema_of(pk: bool, float_keys: bool) -> pa.Schema:
    return pa.schema([pa.field("id", pa.float64() if float_keys else pa.int64(), nullable=False),
                      pa.field("p", pa.string(), nullable=not pk), ("v", pa.int64())])


def canonical(i: int, float_keys: bool) -> int:
    return 0 if float_keys and i == NEG_ZERO else i


@dataclass(frozen=True)
class Write:
    records: list[Record]


@dataclass(frozen=True)
class ChunkedWrite:
    """Several writer.write() calls in one commit: a memtable flush (a new sorted run) after each."""

    chunks: list[list[Record]]


@dataclass(frozen=True)
class Overwrite:
    scope: str | None  # "all", "dynamic" or a partition value (static; None: the null partition)
    records: list[Record]


@dataclass(frozen=True)
class Compact:
    full: bool


Op = Union[Write, ChunkedWrite, Overwrite, Compact]

record = st.tuples(st.sampled_from(["+I", "+I", "+U", "-U", "-D"]), st.integers(0, 12),
                   st.sampled_from(PARTITIONS) | st.none(), st.integers(0, 5) | st.none())
inserts = st.lists(record.map(lambda r: ("+I", *r[1:])), min_size=1, max_size=12)
op = st.one_of(
    st.builds(Write, st.lists(record, min_size=1, max_size=25)),
    st.builds(ChunkedWrite, st.lists(st.lists(record, min_size=1, max_size=10), min_size=2, max_size=4)),
    st.builds(Overwrite, st.sampled_from(["all", "dynamic"]), inserts),
    (st.sampled_from(PARTITIONS) | st.none()).flatmap(
        lambda p: st.builds(Overwrite, st.just(p), st.lists(record.map(lambda r: ("+I", r[1], p, r[3])), max_size=8))
    ),
    st.builds(Compact, st.booleans()),
)


class Oracle:
    """The table as a plain dict replay: key -> row (primary key) or row -> count (no primary key)."""

    def __init__(self, pk: bool, partitioned: bool, float_keys: bool) -> None:
        self.pk = pk
        self.partitioned = partitioned
        self.float_keys = float_keys
        self.rows: dict[Any, Row] = {}
        self.counts: Counter[Row] = Counter()

    def well_formed(self, records: list[Record]) -> list[Record]:
        """A primary key is never null: give its rows a partition value."""
        return [(k, i, "x" if p is None else p, v) for k, i, p, v in records] if self.pk else records

    def apply(self, records: list[Record]) -> None:
        for kind, i, p, v in records:
            i = canonical(i, self.float_keys)
            if self.pk:
                key = (i, p) if self.partitioned else i
                if kind in ("+I", "+U"):
                    self.rows[key] = (i, p, v)
                else:
                    self.rows.pop(key, None)
            else:
                # a retraction of a row that is not there does nothing
                self.counts[(i, p, v)] = max(0, self.counts[(i, p, v)] + (1 if kind in ("+I", "+U") else -1))

    def truncate(self, partitions: set[str | None] | None) -> None:
        """Remove everything (None) or everything in `partitions`."""
        self.rows = {k: r for k, r in self.rows.items() if partitions is not None and r[1] not in partitions}
        self.counts = Counter({r: n for r, n in self.counts.items() if partitions is not None and r[1] not in partitions})

    def state(self) -> list[Row]:
        if self.pk:
            out = list(self.rows.values())
        else:
            out = [r for r, n in self.counts.items() for _ in range(n)]
        return sorted(out, key=_order)


def _order(row: Row) -> tuple[Any, ...]:
    return (row[0], row[1] is None, row[1] or "", row[2] is None, row[2] or 0)


def as_table(records: list[Record], float_keys: bool = False) -> pa.Table:
    ids: pa.Array = pa.array([r[1] for r in records], pa.int64())
    if float_keys:
        special = {NEG_ZERO: -0.0, NAN: float("nan")}
        ids = pa.array([special.get(r[1], float(r[1])) for r in records], pa.float64())
    return pa.table({"_row_kind": pa.array([r[0] for r in records], pa.string()), "id": ids,
                     "p": pa.array([r[2] for r in records], pa.string()),
                     "v": pa.array([r[3] for r in records], pa.int64())})


def read_rows(t: tablestore.Table, snapshot_id: int | None = None) -> list[Row]:
    got = t.read(snapshot_id=snapshot_id)
    ids = [NAN if i != i else int(i) for i in got.column("id").to_pylist()]  # NaN != NaN; -0.0 reads as 0.0
    return sorted(zip(ids, got.column("p").to_pylist(), got.column("v").to_pylist()), key=_order)


@SETTINGS
@given(
    pk=st.booleans(),
    partitioned=st.booleans(),
    bucket=st.sampled_from([1, 3]),
    write_only=st.booleans(),
    float_keys=st.booleans(),
    deletion_vectors=st.booleans(),
    ops=st.lists(op, min_size=1, max_size=8),
)
def test_table_matches_dict_replay(pk: bool, partitioned: bool, bucket: int, write_only: bool, float_keys: bool,
                                   deletion_vectors: bool, ops: list[Op]) -> None:
    with tempfile.TemporaryDirectory() as wh:
        cat = tablestore.Catalog(wh)
        cat.create_database("db")
        t = cat.create_table(
            "db.t", schema=schema_of(pk, float_keys),
            primary_key=((["id", "p"] if partitioned else ["id"]) if pk else None),
            partition_by=["p"] if partitioned else None,
            options={"bucket": str(bucket), "write-buffer-size": "1 kb", "target-file-size": "2 kb",
                     "num-sorted-run.compaction-trigger": "2", "manifest.merge-min-count": "2",
                     "write-only": str(write_only).lower(),
                     **({"deletion-vectors.enabled": "true"} if pk and deletion_vectors else {})},
        )
        store = catalog.Catalog(wh).get_table("db.t").store
        oracle = Oracle(pk, partitioned, float_keys)
        history: dict[int, list[Row]] = {}

        for step, operation in enumerate(ops):
            if isinstance(operation, Write):
                records = oracle.well_formed(operation.records)
                t.write(as_table(records, float_keys))
                oracle.apply(records)
            elif isinstance(operation, ChunkedWrite):
                writer = store.new_write()
                for chunk in operation.chunks:
                    records = oracle.well_formed(chunk)
                    table = as_table(records, float_keys)
                    kinds = [1 if k in ("-U", "-D") else 0 for k in table.column("_row_kind").to_pylist()]
                    writer.write(table.drop_columns(["_row_kind"]), kinds)  # type: ignore[arg-type]
                    oracle.apply(records)
                store.new_commit(f"chunked-{step}").commit(writer.prepare_commit(), identifier=step)
            elif isinstance(operation, Overwrite):
                records = oracle.well_formed(operation.records)
                scope = "x" if operation.scope is None and pk else operation.scope  # a key is never null
                if scope == "all" or not partitioned:
                    t.write(as_table(records, float_keys), overwrite=True if scope != "dynamic" else "dynamic")
                    oracle.truncate(None)
                elif scope == "dynamic":
                    t.write(as_table(records, float_keys), overwrite="dynamic")
                    oracle.truncate({r[2] for r in records})
                else:
                    t.write(as_table(records, float_keys), overwrite={"p": scope})
                    oracle.truncate({scope})
                oracle.apply(records)
            else:
                t.compact(full=operation.full)

            expected = oracle.state()
            assert read_rows(t) == expected, (step, operation)
            latest = t.latest_snapshot_id()
            if latest is not None:
                for info in t.snapshots():
                    history.setdefault(info.id, expected)  # new snapshots of this step (writes and compactions)

        for sid, expected in history.items():
            assert read_rows(t, snapshot_id=sid) == expected, sid


# -- the checkpointed session path: `log_writer()` sessions, several checkpoints each ----------------------------

@dataclass(frozen=True)
class Checkpoint:
    """Several session.write() calls, then commit() -- or abort(), which must leave no trace."""

    chunks: list[list[Record]]
    abort: bool


checkpoint = st.builds(Checkpoint, st.lists(st.lists(record, min_size=1, max_size=10), min_size=1, max_size=3),
                       st.sampled_from([False, False, False, True]))
STOP_TRIGGER = 3


def max_sorted_runs(wh: str) -> int:
    import filestore

    store = catalog.Catalog(wh).get_table("db.t").store
    return max(filestore.sorted_run_counts(store.live_files(store.snapshots.latest())).values(), default=0)


@SETTINGS
@given(
    pk=st.booleans(),
    partitioned=st.booleans(),
    bucket=st.sampled_from([1, 3]),
    write_only=st.booleans(),
    sessions=st.lists(st.lists(checkpoint, min_size=1, max_size=4), min_size=1, max_size=3),
)
def test_checkpointed_sessions_match_dict_replay(
    pk: bool, partitioned: bool, bucket: int, write_only: bool, sessions: list[list[Checkpoint]]
) -> None:
    import copy

    with tempfile.TemporaryDirectory() as wh:
        cat = tablestore.Catalog(wh)
        cat.create_database("db")
        t = cat.create_table(
            "db.t", schema=schema_of(pk, float_keys=False),
            primary_key=((["id", "p"] if partitioned else ["id"]) if pk else None),
            partition_by=["p"] if partitioned else None,
            options={"bucket": str(bucket), "write-buffer-size": "1 kb", "target-file-size": "2 kb",
                     "num-sorted-run.compaction-trigger": "2", "num-sorted-run.stop-trigger": str(STOP_TRIGGER),
                     "manifest.merge-min-count": "2", "write-only": str(write_only).lower()},
        )
        oracle = Oracle(pk, partitioned, float_keys=False)
        history: dict[int, list[Row]] = {}
        for s, checkpoints in enumerate(sessions):
            with t.log_writer() as w:
                for c, cp in enumerate(checkpoints):
                    pending = copy.deepcopy(oracle)
                    for chunk in cp.chunks:
                        records = pending.well_formed(chunk)
                        w.write(as_table(records))
                        pending.apply(records)
                    if cp.abort:
                        w.abort()
                    else:
                        w.commit()
                        oracle = pending
                    expected = oracle.state()
                    assert read_rows(t) == expected, (s, c)
                    if not write_only:
                        assert max_sorted_runs(wh) <= STOP_TRIGGER, (s, c)
                    for info in t.snapshots():
                        history.setdefault(info.id, expected)
        if write_only:
            assert {info.kind for info in t.snapshots()} <= {"APPEND"}
        for sid, expected in history.items():
            assert read_rows(t, snapshot_id=sid) == expected, sid
