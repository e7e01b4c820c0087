"""Issue 11 item 1: a table has an identity (a uuid in its schema) that writers check, so a handle of a dropped
table fails with a clear error instead of writing into the table created again under its name."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import tablestore

A = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
B = pa.schema([pa.field("id", pa.int64(), nullable=False), ("w", pa.int64())])


def catalog(tmp_path: Path) -> tablestore.Catalog:
    cat = tablestore.Catalog(str(tmp_path / "wh"))
    cat.create_database("db", ignore_if_exists=True)
    return cat


@pytest.mark.parametrize("schema", [A, B], ids=["same schema", "other schema"])
def test_a_stale_handle_cannot_write_into_a_recreated_table(tmp_path: Path, schema: pa.Schema) -> None:
    cat = catalog(tmp_path)
    old = cat.create_table("db.t", schema=A, primary_key=["id"])
    old.write(pa.table({"id": [1], "v": ["old"]}, schema=A))
    cat.drop_table("db.t")
    new = cat.create_table("db.t", schema=schema, primary_key=["id"])
    first = pa.table({"id": [2], schema.names[1]: pa.array([None], schema.field(1).type)}, schema=schema)
    new.write(first)

    with pytest.raises(tablestore.TableDroppedError, match="'db.t'.*dropped and created again"):
        old.write(pa.table({"id": [3], "v": ["stale"]}, schema=A))
    with pytest.raises(tablestore.TableDroppedError):
        old.compact(full=True)
    with pytest.raises(tablestore.TableDroppedError):
        with old.log_writer() as w:
            w.write(pa.table({"id": [4], "v": ["stale"]}, schema=A))
            w.commit()
    assert new.read().to_pylist() == first.to_pylist()  # the new table is untouched and readable
    assert len(new.snapshots()) == 1


def test_a_write_after_drop_table_does_not_recreate_the_directory(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    t = cat.create_table("db.t", schema=A, primary_key=["id"])
    t.write(pa.table({"id": [1], "v": ["a"]}, schema=A))
    cat.drop_table("db.t")
    with pytest.raises(tablestore.TableDroppedError, match="'db.t'.*was dropped since"):
        t.write(pa.table({"id": [2], "v": ["b"]}, schema=A))
    assert not Path(t.path).exists()
    assert not cat.table_exists("db.t") and cat.list_tables("db") == []


def test_a_handle_of_the_table_itself_keeps_writing(tmp_path: Path) -> None:
    cat = catalog(tmp_path)
    cat.create_table("db.t", schema=A, primary_key=["id"])
    one, two = cat.get_table("db.t"), tablestore.Catalog(str(tmp_path / "wh")).get_table("db.t")
    one.write(pa.table({"id": [1], "v": ["a"]}, schema=A))
    two.write(pa.table({"id": [2], "v": ["b"]}, schema=A))
    assert one.read().num_rows == 2
