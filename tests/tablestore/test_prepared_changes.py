"""The log records of files written elsewhere (tablestore.prepared.changes_of): replayed in order they give what the
table reads after the commit, for primary-key tables and count tables (no primary key)."""
from __future__ import annotations

import collections
import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
from tablestore.convert import value_kinds
from tablestore.prepared import changes_of
from tablestore.writer import TableWriter

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("v", pa.int64())])
_names = itertools.count()
ops = st.lists(st.tuples(st.sampled_from(["+I", "+U", "-U", "-D"]), st.integers(0, 6), st.integers(0, 2)),
               max_size=40)


def _files(t: tablestore.Table, changelog: list[tuple[str, int, int]]) -> list[Any]:
    store = t._handle.store
    writer = store.new_write(store.live_files(store.snapshots.latest()))
    data = pa.Table.from_pylist([{"id": i, "v": v} for _, i, v in changelog], schema=SCHEMA)
    kinds = value_kinds(pa.array([k for k, _, _ in changelog], pa.string()))
    writer.write(writer.conform(data), kinds, conformed=True)
    return writer.prepare_commit()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(first=ops, second=ops, pk=st.booleans())
def test_changes_of_the_files_replay_to_the_table(tmp_path: Path, first: list[Any], second: list[Any],
                                                   pk: bool) -> None:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(f"db.t{next(_names)}", SCHEMA, primary_key=["id"] if pk else None,
                         options={"bucket": "2"})
    keyed: dict[int, tuple[int, int]] = {}
    counted: collections.Counter[tuple[int, int]] = collections.Counter()
    with TableWriter(t._write_target(), commit_user="u") as session:
        for ident, changelog in enumerate((first, second), start=1):
            messages = _files(t, changelog)
            for changes, buckets in changes_of(t._handle.store.context, messages):
                assert changes.num_rows == len(buckets)
                for r in changes.to_pylist():
                    row = (r["id"], r["v"])
                    if r["_row_kind"] == "+I":
                        keyed[r["id"]] = row
                        counted[row] += 1
                    else:
                        keyed.pop(r["id"], None)
                        counted[row] = max(0, counted[row] - 1)
            session.commit_prepared(messages, ident)
    got = sorted((r["id"], r["v"]) for r in t.read().to_pylist())
    if pk:
        assert got == sorted(keyed.values())
    else:
        assert got == sorted(counted.elements())
