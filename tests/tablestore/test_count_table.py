"""Issue 11 item 11: on a table without a primary key, a retraction of a row that is not there does nothing; it
does not hide a later insert of the row, before or after compaction."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import catalog
import tablestore

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def changes(*records: tuple[str, int, str]) -> pa.Table:
    return pa.table({"_row_kind": [r[0] for r in records], "k": [r[1] for r in records],
                     "v": [r[2] for r in records]})


def rows(t: tablestore.Table) -> list[tuple[int, str]]:
    return sorted((r["k"], r["v"]) for r in t.read().to_pylist())


@pytest.mark.parametrize("compact", ["none", "between", "after", "full-between"])
def test_a_retraction_of_a_missing_row_does_not_hide_a_later_insert(tmp_path: Path, compact: str) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, options={"write-only": "true"})
    t.write(changes(("+I", 1, "a")))
    t.write(changes(("-D", 2, "b"), ("-D", 1, "a"), ("-D", 1, "a")))  # the second -D of (1, a) finds nothing
    if compact != "none" and compact != "after":
        t.compact(full=compact == "full-between")
    assert rows(t) == []
    t.write(changes(("+I", 2, "b"), ("+I", 1, "a")))
    if compact == "after":
        t.compact(full=True)
    assert rows(t) == [(1, "a"), (2, "b")]
    t.compact(full=True)
    assert rows(t) == [(1, "a"), (2, "b")]
    t.write(changes(("+I", 1, "a"), ("-U", 1, "a"), ("-U", 1, "a"), ("-U", 1, "a"), ("+U", 1, "a")))
    assert rows(t) == [(1, "a"), (2, "b")]


def test_concurrent_appends_to_one_bucket_of_a_count_table_are_ordered(tmp_path: Path) -> None:
    """Counts apply in sequence order now, so two writers may not reuse the same sequence numbers in a bucket:
    the later commit re-plans on the latest snapshot, as on a primary-key table (Table.write does so itself)."""
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    cat.create_table("db.t", schema=SCHEMA, options={"write-only": "true"})
    store = catalog.Catalog(str(tmp_path)).get_table("db.t").store
    first, second = store.new_write(), store.new_write()
    first.write(changes(("+I", 1, "a")).drop_columns(["_row_kind"]))
    second.write(changes(("+I", 1, "a")).drop_columns(["_row_kind"]), np.array([1], dtype=np.int8))  # a -D
    store.new_commit("first").commit(first.prepare_commit(), identifier=1)
    with pytest.raises(tablestore.SequenceConflictError):
        store.new_commit("second").commit(second.prepare_commit(), identifier=1)
    t = cat.get_table("db.t")
    t.write(changes(("-D", 1, "a")))
    assert rows(t) == []
