"""`Table.delete` (what SQL DELETE FROM runs) against a replay oracle: after random writes, deleting the rows a
filter selects leaves exactly the rows the oracle keeps, on primary-key tables (upsert by key) and on tables without
one (a multiset of rows), and commits at most one snapshot."""
from __future__ import annotations

import tempfile
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

import tablestore

SCHEMA = pa.schema([pa.field("k", pa.int64(), nullable=False), ("v", pa.int64())])
writes = st.lists(st.lists(st.tuples(st.integers(0, 8), st.one_of(st.none(), st.integers(0, 9))), min_size=1,
                           max_size=6), min_size=1, max_size=4)


def _table(root: str, primary_key: list[str]) -> tablestore.Table:
    cat = tablestore.Catalog(root)
    cat.create_database("db")
    return cat.create_table("db.t", schema=SCHEMA, primary_key=primary_key, options={"bucket": "2", "write-only": "true"})   # no COMPACT snapshots


def _write(t: tablestore.Table, rows: list[tuple[int, int | None]]) -> None:
    t.write(pa.table({"k": [r[0] for r in rows], "v": [r[1] for r in rows]}, schema=SCHEMA))


@settings(max_examples=25, deadline=None)
@given(batches=writes, threshold=st.integers(0, 10))
def test_delete_by_key_matches_the_oracle(batches: list[list[tuple[int, int | None]]], threshold: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        t = _table(root, ["k"])
        oracle: dict[int, int | None] = {}
        for rows in batches:
            _write(t, rows)
            oracle.update(dict(rows))
        before = t.latest_snapshot_id()
        result = t.delete(pc.field("v") < threshold)   # null v: the condition is null, the row stays
        kept = {k: v for k, v in oracle.items() if v is None or v >= threshold}
        assert result.deleted_rows == len(oracle) - len(kept)
        assert t.latest_snapshot_id() == (before if result.deleted_rows == 0 else result.snapshot_id)
        got = t.read()
        assert dict(zip(got.column("k").to_pylist(), got.column("v").to_pylist())) == kept


@settings(max_examples=25, deadline=None)
@given(batches=writes, key=st.integers(0, 8))
def test_delete_without_primary_key_removes_every_copy(batches: list[list[tuple[int, int | None]]], key: int) -> None:
    with tempfile.TemporaryDirectory() as root:
        t = _table(root, [])
        oracle: Counter[tuple[int, int | None]] = Counter()
        for rows in batches:
            _write(t, rows)
            oracle.update(rows)
        result = t.delete(pc.field("k") == key)
        assert result.deleted_rows == sum(n for row, n in oracle.items() if row[0] == key)
        got = t.read()
        assert Counter(zip(got.column("k").to_pylist(), got.column("v").to_pylist())) == Counter(
            {row: n for row, n in oracle.items() if row[0] != key})
