"""`Table.system_table`: `audit_log` is Paimon's (every live row, its row kind in a first column `rowkind`),
`latest_changes` the changes the latest snapshot committed (tablestore.system_tables)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import tablestore

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False), ("v", pa.string())])


def _rows(t: pa.Table) -> list[tuple[object, ...]]:
    return sorted(tuple(r.values()) for r in t.to_pylist())


@pytest.fixture
def table(tmp_path: Path) -> tablestore.Table:
    """A partitioned primary-key table after inserts, an update and a delete, then a full compaction."""
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id", "dt"], partition_by=["dt"],
                         options={"bucket": "2", "write-only": "true"})
    t.write(pa.table({"id": [1, 2, 3, 4], "dt": ["a", "a", "b", "b"], "v": ["x", "y", "z", "w"]}, schema=SCHEMA))
    t.write(pa.table({"id": [1, 5], "dt": ["a", "b"], "v": ["X", "q"]}, schema=SCHEMA))   # an update, an insert
    t.delete(pc.field("id") == 3)
    return t


def test_audit_log_is_every_live_row_with_its_row_kind_even_after_a_compaction(table: tablestore.Table) -> None:
    assert table.compact(full=True) is not None
    audit = table.system_table("audit_log")
    assert audit.schema.names == ["rowkind", "id", "dt", "v"]
    assert audit.schema.field("rowkind") == pa.field("rowkind", pa.string(), False)
    assert _rows(audit.drop_columns(["rowkind"])) == _rows(table.read())
    assert _rows(audit) == [("+I", 1, "a", "X"), ("+I", 2, "a", "y"), ("+I", 4, "b", "w"), ("+I", 5, "b", "q")]
    assert table.system_table("latest_changes").num_rows == 0   # a compaction changes no row


def test_latest_changes_are_the_last_snapshots_changelog(table: tablestore.Table) -> None:
    assert [(r["_row_kind"], r["id"], r["v"]) for r in table.system_table("latest_changes").to_pylist()] == [
        ("-D", 3, "z")]
    table.write(pa.table({"id": [2, 6], "dt": ["a", "a"], "v": ["Y", "n"]}, schema=SCHEMA))
    latest = table.system_table("latest_changes")
    assert latest.schema.names == ["_row_kind", "id", "dt", "v"]
    assert _rows(latest) == [("+I", 6, "a", "n"), ("+U", 2, "a", "Y"), ("-U", 2, "a", "y")]
    assert _rows(table.system_table("audit_log")) == [   # the whole table, not only what changed
        ("+I", 1, "a", "X"), ("+I", 2, "a", "Y"), ("+I", 4, "b", "w"), ("+I", 5, "b", "q"), ("+I", 6, "a", "n")]


def test_audit_log_of_a_table_without_a_primary_key_and_of_an_empty_table(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.logs", schema=SCHEMA)
    assert t.system_table("audit_log").schema.names == ["rowkind", "id", "dt", "v"]
    assert t.system_table("audit_log").num_rows == 0 and t.system_table("latest_changes").num_rows == 0
    t.write(pa.table({"id": [1, 1, 2], "dt": ["a", "a", "b"], "v": ["x", "x", None]}, schema=SCHEMA))  # a duplicate
    t.delete(pc.field("id") == 2)
    assert _rows(t.system_table("audit_log")) == [("+I", 1, "a", "x"), ("+I", 1, "a", "x")]
    assert [r["_row_kind"] for r in t.system_table("latest_changes").to_pylist()] == ["-D"]


def test_an_unknown_system_table_names_them_all(table: tablestore.Table) -> None:
    with pytest.raises(tablestore.TableStoreError, match="no system table 'audit'; system tables: snapshots, "
                       "files, schemas, options, partitions, buckets, manifests, audit_log, latest_changes"):
        table.system_table("audit")
