"""Changing the options of an existing table: only those `catalog.options.ALTERABLE` names, each value checked,
published as the next schema (what ALTER TABLE ... SET/UNSET TBLPROPERTIES does in Spark SQL)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

import catalog
from catalog import InvalidOptionError

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> catalog.Catalog:
    c = catalog.Catalog(str(tmp_path))
    c.create_database("db")
    c.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "2", "snapshot.num-retained.max": "50"},
                   comment="the comment")
    return c


def test_set_and_unset_alterable_options(cat: catalog.Catalog) -> None:
    altered = cat.alter_table_options("db.t", {"write-only": "true", "commit.timeout": "5 s"},
                                      ["snapshot.num-retained.max"])
    assert altered.options.raw == {"bucket": "2", "write-only": "true", "commit.timeout": "5 s",
                                   **{k: v for k, v in altered.options.raw.items() if k.startswith("log.")}}
    assert altered.store.options.write_only and altered.store.options.snapshot_num_retained_max == 2147483647
    again = cat.get_table("db.t")
    assert again.schema.id == 1 and again.schema.comment == "the comment" and again.schema.primary_keys == ("id",)
    assert again.schema.uuid == catalog.Catalog(cat.warehouse).get_table("db.t").schema.uuid


def test_fixed_unknown_and_invalid_options_are_refused(cat: catalog.Catalog) -> None:
    with pytest.raises(InvalidOptionError, match="option 'bucket' is fixed when the table is created.*write-only"):
        cat.alter_table_options("db.t", {"bucket": "4"})
    with pytest.raises(InvalidOptionError, match="option 'log.system' is fixed"):
        cat.alter_table_options("db.t", unset_options=["log.system"])
    with pytest.raises(InvalidOptionError, match="unknown table option 'bukket'"):
        cat.alter_table_options("db.t", {"bukket": "4"})
    with pytest.raises(InvalidOptionError, match="commit.max-retries"):
        cat.alter_table_options("db.t", {"commit.max-retries": "-1"})
    assert cat.get_table("db.t").schema.id == 0   # nothing published
