"""One rename scenario run on a local warehouse (tests/catalog/test_catalog.py) and on S3
(tests/tablestore/test_s3_warehouse.py)."""
from __future__ import annotations

import pyarrow as pa
import pytest

import tablestore
from tablestore import DatabaseNotFoundError, TableAlreadyExistsError, TableNotFoundError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("dt", pa.string(), nullable=False),
                    ("v", pa.string())])


def rename_case(cat: tablestore.Catalog) -> None:
    """Rename within a database and into another: the data, its history and its writes follow the new name."""
    t = cat.create_table("db.old", SCHEMA, primary_key=["id", "dt"], partition_by=["dt"], options={"bucket": "2"})
    t.write(pa.table({"id": [1, 2], "dt": ["a", "b"], "v": ["x", "y"]}, schema=SCHEMA))
    t.write(pa.table({"id": [2], "dt": ["b"], "v": ["Y"]}, schema=SCHEMA))
    cat.rename_table("db.old", "db.new")
    assert not cat.table_exists("db.old") and cat.list_tables("db") == ["new"]
    renamed = cat.get_table("db.new")
    assert sorted(renamed.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "dt": "a", "v": "x"}, {"id": 2, "dt": "b", "v": "Y"}]
    assert [s.id for s in renamed.snapshots()] == [1, 2]
    assert renamed.read(snapshot_id=1).num_rows == 2   # its history came along
    renamed.write(pa.table({"id": [3], "dt": ["a"], "v": ["z"]}, schema=SCHEMA))
    cat.create_database("other")
    cat.rename_table("db.new", "other.moved")
    assert cat.list_tables("db") == [] and cat.get_table("other.moved").read().num_rows == 3
    with pytest.raises(TableNotFoundError, match="'db.old' does not exist"):
        cat.rename_table("db.old", "db.x")
    cat.create_table("db.taken", SCHEMA)
    with pytest.raises(TableAlreadyExistsError, match="'db.taken' already exists"):
        cat.rename_table("other.moved", "db.taken")
    with pytest.raises(DatabaseNotFoundError, match="'nodb' does not exist"):
        cat.rename_table("other.moved", "nodb.t")
    assert cat.get_table("other.moved").read().num_rows == 3   # a refused rename changed nothing
