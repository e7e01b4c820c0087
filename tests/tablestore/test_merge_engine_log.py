"""A table whose rows merge (a merge engine other than deduplicate, or a `sequence.field`) with a Kafka log: the log
holds the merged result's changelog (tablestore.log_publish.log_changes), produced right after each snapshot, so a
consumer of the topic sees the rows a reader of the table sees. Held to a dict replay of the merge."""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from log_helpers import drop_created_tables, kafka_catalog

import tablestore
from tablestore import log_publish

pytestmark = pytest.mark.kafka

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int64()), ("name", pa.string()),
                    ("ts", pa.int64())])
Row = tuple[Any, ...]


@pytest.fixture()
def cat(tmp_path: Path, kafka_bootstrap: str) -> Iterator[tablestore.Catalog]:
    yield kafka_catalog(tmp_path, kafka_bootstrap)
    drop_created_tables()


def _table(cat: tablestore.Catalog, **options: str) -> tablestore.Table:
    return cat.create_table(f"db.t_{uuid.uuid4().hex[:8]}", SCHEMA, primary_key=["id"],
                            options={"bucket": "2", **options})


def _write(t: tablestore.Table, data: list[Row], kinds: list[str] | None = None) -> int | None:
    table = pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in data], schema=SCHEMA)
    if kinds is not None:
        table = table.add_column(0, "_row_kind", pa.array(kinds))
    return t.write(table)


def _log(t: tablestore.Table, normalize: bool = False) -> dict[int, list[Row]]:
    """The log per key, in the order it holds them: (row kind, *row); as stored (`normalize` False) the kind's
    sign only, `-` or `+` (debezium-json stores a -U as a delete of the old row and a +U as a create)."""
    out: dict[int, list[Row]] = {}
    for batch in t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1.0, normalize=normalize):
        for r in batch.to_pylist():
            kind = r["_row_kind"] if normalize else r["_row_kind"][0]
            out.setdefault(r["id"], []).append((kind, *(r[c] for c in SCHEMA.names)))
    return out


def _pending(t: tablestore.Table) -> tuple[int, ...]:
    """The snapshots whose log is not published yet."""
    latest = t._handle.store.snapshots.latest()
    return () if latest is None else tuple(latest.log_pending)


def _rows(t: tablestore.Table) -> dict[int, Row]:
    return {r["id"]: tuple(r[c] for c in SCHEMA.names) for r in t.read().to_pylist()}


def test_a_partial_update_tables_log_holds_the_merged_rows(cat: tablestore.Catalog) -> None:
    t = _table(cat, **{"merge-engine": "partial-update", "log.changelog-mode": "all"})
    _write(t, [(1, 3, None, 1)])
    _write(t, [(1, None, "pen", None), (2, 1, None, 2)])
    _write(t, [(1, None, None, 3)])
    _write(t, [(2, 1, None, None)])   # changes nothing: nothing in the log
    assert _rows(t) == {1: (1, 3, "pen", 3), 2: (2, 1, None, 2)}
    assert _log(t) == {
        1: [("+", 1, 3, None, 1), ("-", 1, 3, None, 1), ("+", 1, 3, "pen", 1), ("-", 1, 3, "pen", 1),
            ("+", 1, 3, "pen", 3)],
        2: [("+", 2, 1, None, 2)]}
    assert _log(t, normalize=True)[1] == [("+I", 1, 3, None, 1), ("-U", 1, 3, None, 1), ("+U", 1, 3, "pen", 1),
                                          ("-U", 1, 3, "pen", 1), ("+U", 1, 3, "pen", 3)]
    assert _pending(t) == ()


@pytest.mark.parametrize("consistency", ["transactional", "eventual"])
def test_in_upsert_mode_the_log_holds_the_merged_rows_without_update_befores(cat: tablestore.Catalog,
                                                                             consistency: str) -> None:
    t = _table(cat, **{"merge-engine": "partial-update", "log.consistency": consistency})   # changelog-mode upsert
    _write(t, [(1, 3, None, 1)])
    _write(t, [(1, None, "pen", None)])
    assert _log(t) == {1: [("+", 1, 3, None, 1), ("+", 1, 3, "pen", 1)]}   # no retraction stored
    assert _log(t, normalize=True) == {1: [("+I", 1, 3, None, 1), ("-U", 1, 3, None, 1), ("+U", 1, 3, "pen", 1)]}


def test_an_aggregation_tables_log_holds_the_aggregates_and_their_retractions(cat: tablestore.Catalog) -> None:
    t = _table(cat, **{"merge-engine": "aggregation", "fields.qty.aggregate-function": "sum",
                       "fields.name.aggregate-function": "last_value", "fields.ts.aggregate-function": "sum",
                       "log.changelog-mode": "all"})
    _write(t, [(1, 3, "a", 10), (1, 4, "b", 5)])
    _write(t, [(1, 3, "a", 10)], kinds=["-U"])   # retracts from the sums; last_value becomes null
    assert _rows(t) == {1: (1, 4, None, 5)}
    assert _log(t, normalize=True) == {1: [("+I", 1, 7, "b", 15), ("-U", 1, 7, "b", 15), ("+U", 1, 4, None, 5)]}


def test_first_row_and_sequence_field_tables_log_only_the_row_that_wins(cat: tablestore.Catalog) -> None:
    first = _table(cat, **{"merge-engine": "first-row", "log.changelog-mode": "all"})
    _write(first, [(1, 1, "first", 1)])
    _write(first, [(1, 2, "later", 2), (2, 5, "new", 5)])
    assert _log(first) == {1: [("+", 1, 1, "first", 1)], 2: [("+", 2, 5, "new", 5)]}
    ordered = _table(cat, **{"sequence.field": "ts", "log.changelog-mode": "all"})
    _write(ordered, [(1, 1, "new", 5)])
    _write(ordered, [(1, 2, "late", 3)])   # an older sequence number: the row in the table does not change
    _write(ordered, [(1, 3, "newer", 6)])
    assert _log(ordered) == {1: [("+", 1, 1, "new", 5), ("-", 1, 1, "new", 5), ("+", 1, 3, "newer", 6)]}


def test_a_failed_publish_leaves_the_snapshot_in_and_the_next_commit_publishes_its_log(
        cat: tablestore.Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    t = _table(cat, **{"merge-engine": "partial-update", "log.changelog-mode": "all"})
    real = log_publish.publish_bucket

    def broken(*args: Any, **kwargs: Any) -> int | None:
        raise RuntimeError("broker gone")

    monkeypatch.setattr(log_publish, "publish_bucket", broken)
    with pytest.raises(tablestore.LogPublishError, match=r"snapshot 1 was committed .*next commit publishes it: "
                       "RuntimeError: broker gone"):
        _write(t, [(1, 3, None, 1)])
    assert _pending(t) == (t.latest_snapshot_id(),)   # in, its log pending
    assert _rows(t) == {1: (1, 3, None, 1)} and _log(t) == {}
    monkeypatch.setattr(log_publish, "publish_bucket", real)
    _write(t, [(1, None, "pen", None)])
    assert _log(t) == {1: [("+", 1, 3, None, 1), ("-", 1, 3, None, 1), ("+", 1, 3, "pen", 1)]}
    assert _pending(t) == ()


_COMMITS = st.lists(st.lists(st.tuples(st.integers(0, 5), st.none() | st.integers(-3, 3),
                                       st.none() | st.sampled_from(["a", "b"])), min_size=1, max_size=6),
                    min_size=1, max_size=6)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(commits=_COMMITS, compact_after=st.integers(0, 6))
def test_the_log_replayed_by_key_is_the_table_and_the_dict_replay(
        cat: tablestore.Catalog, commits: list[list[tuple[int, int | None, str | None]]], compact_after: int) -> None:
    """Partial update of `name` and sums of `qty`, across commits, a compaction in between: replaying the raw log
    by key (each -U the row the key had, each +I/+U its next row) gives the table and the dict replay."""
    t = _table(cat, **{"merge-engine": "aggregation", "fields.qty.aggregate-function": "sum",
                       "fields.name.aggregate-function": "last_non_null_value",
                       "fields.ts.aggregate-function": "count", "log.changelog-mode": "all"})
    oracle: dict[int, Row] = {}
    for i, commit in enumerate(commits):
        _write(t, [(k, q, n, 1) for k, q, n in commit])
        for k, q, n in commit:
            old = oracle.get(k)
            if old is None:
                oracle[k] = (k, q, n, 1)
            else:
                qty = old[1] if q is None else q if old[1] is None else old[1] + q
                oracle[k] = (k, qty, n if n is not None else old[2], old[3] + 1)
        if i == compact_after:
            t.compact(full=True)
    replayed: dict[int, Row] = {}
    for key, records in _log(t).items():
        for kind, *row in records:
            if kind == "-":
                assert replayed.get(key) == tuple(row), f"key {key}: {kind} of a row the log did not hold"
                del replayed[key]
            else:
                assert key not in replayed, f"key {key}: {kind} without a retraction of the row before"
                replayed[key] = tuple(row)
    assert replayed == _rows(t) == oracle
