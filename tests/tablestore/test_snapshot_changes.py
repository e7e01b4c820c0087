"""The changelog between snapshots (how a table without a log streams): replayed from the empty table, snapshot by
snapshot, it gives each snapshot's rows; retractions carry the old row; compactions give nothing."""
from __future__ import annotations

import collections
import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
from tablestore.snapshot_changes import snapshot_changes, snapshot_records

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64()), pa.field("part", pa.string(), False)])
_names = itertools.count()
change = st.tuples(st.sampled_from(["+I", "-D"]), st.integers(0, 8), st.one_of(st.none(), st.integers(0, 2)),
                   st.sampled_from(["x", "y"]))
step = st.one_of(st.lists(change, min_size=1, max_size=10), st.just("compact"), st.just("overwrite"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=1, max_size=6), key=st.sampled_from(["none", "id, part", "id"]))
def test_snapshot_changelog_replays_to_every_snapshot(tmp_path: Path, steps: list[Any], key: str) -> None:
    """Keyed tables: a composite key in a partitioned table, one key column in an unpartitioned one (an append's
    changes are read for its keys only, with the key filter exact for one column)."""
    pk = key != "none"
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(f"db.t{next(_names)}", SCHEMA, primary_key=key.split(", ") if pk else None,
                         partition_by=None if key == "id" else ["part"], options={"bucket": "2", "write-only": "true"})
    for s in steps:
        if s == "compact":
            t.compact(full=True)
        elif s == "overwrite":
            t.write(pa.Table.from_pylist([{"id": 1, "v": 5, "part": "x"}], schema=SCHEMA), overwrite=True)
        else:
            data = pa.Table.from_pylist([{"id": i, "v": v, "part": p} for _, i, v, p in s], schema=SCHEMA)
            t.write(data.add_column(0, "_row_kind", pa.array([k for k, *_ in s], pa.string())))
    store = t._handle.store
    keyed: dict[tuple[Any, ...], dict[str, Any]] = {}
    counted: collections.Counter[tuple[Any, ...]] = collections.Counter()
    upserted: dict[tuple[Any, ...], dict[str, Any]] = {}
    previous = None
    for info in t.snapshots():
        snapshot = store.snapshots.get(info.id)
        produced = list(snapshot_changes(store, previous, snapshot))
        if snapshot.commit_kind.value == "COMPACT":
            assert produced == []
        for changes in produced:
            for r in changes.to_pylist():
                kind = r.pop("_row_kind")
                k = (r["id"], r["part"]) if key != "id" else (r["id"],)
                row = (r["id"], r["v"], r["part"])
                if kind in ("+I", "+U"):
                    keyed[k] = r
                    counted[row] += 1
                else:
                    if pk:
                        assert keyed.pop(k) == r  # the retraction carries the old row
                    assert counted[row] > 0
                    counted[row] -= 1
        if pk:   # the records as written (changelog.normalize = false), replayed key-wise as an upsert log
            for changes in snapshot_records(store, previous, snapshot):
                for r in changes.to_pylist():
                    kind = r.pop("_row_kind")
                    k = (r["id"], r["part"]) if key != "id" else (r["id"],)
                    if kind in ("+I", "+U"):
                        upserted[k] = r
                    elif kind == "-D":
                        upserted.pop(k, None)
        expected = sorted(((r["id"], r["v"], r["part"]) for r in t.read(snapshot_id=info.id).to_pylist()), key=repr)
        got = sorted(((r["id"], r["v"], r["part"]) for r in keyed.values()) if pk else counted.elements(), key=repr)
        assert got == expected
        if pk:
            assert sorted(((r["id"], r["v"], r["part"]) for r in upserted.values()), key=repr) == expected
        previous = snapshot


def test_a_not_null_value_column_streams_inserts_updates_and_deletes(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1"})   # `part`: a NOT NULL value
    t.write(pa.Table.from_pylist([{"id": 1, "v": 1, "part": "x"}, {"id": 2, "v": 2, "part": "y"}], schema=SCHEMA))
    t.write(pa.Table.from_pylist([{"id": 2, "v": 3, "part": "z"}, {"id": 1, "v": 1, "part": "x"}], schema=SCHEMA)
            .add_column(0, "_row_kind", pa.array(["+U", "-D"])))
    store = t._handle.store
    first, second = (store.snapshots.get(i) for i in (1, 2))
    assert [c.to_pylist() for c in snapshot_changes(store, None, first)] == [[
        {"_row_kind": "+I", "id": 1, "v": 1, "part": "x"}, {"_row_kind": "+I", "id": 2, "v": 2, "part": "y"}]]
    assert [c.to_pylist() for c in snapshot_changes(store, first, second)] == [[
        {"_row_kind": "-D", "id": 1, "v": 1, "part": "x"}, {"_row_kind": "-U", "id": 2, "v": 2, "part": "y"},
        {"_row_kind": "+U", "id": 2, "v": 3, "part": "z"}]]
