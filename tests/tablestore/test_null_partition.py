"""Issue 11 item 3: the null partition has its own encoding; the string "__DEFAULT_PARTITION__" is an ordinary
value that filters find and overwrites keep apart from null."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tablestore
from filestore.paths import DEFAULT_PARTITION
from filestore.partition import partition_value, render_partition_column

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
LITERALS = [DEFAULT_PARTITION, DEFAULT_PARTITION + "%", DEFAULT_PARTITION + "%%", "%" + DEFAULT_PARTITION, "x"]


def new_table(tmp_path: Path) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", schema=SCHEMA, partition_by=["p"])


def ids(t: tablestore.Table, **kwargs: object) -> list[int]:
    return sorted(t.read(**kwargs).column("id").to_pylist())  # type: ignore[arg-type]


def seed(t: tablestore.Table) -> None:
    t.write(pa.table({"id": [1, 2, 3, 4], "p": [None, DEFAULT_PARTITION, DEFAULT_PARTITION + "%", "x"]},
                     schema=SCHEMA))


def test_the_literal_string_and_null_are_different_partitions(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    seed(t)
    assert {p.name for p in Path(t.path).glob("p=*")} == {
        "p=__DEFAULT_PARTITION__", "p=__DEFAULT_PARTITION__%25", "p=__DEFAULT_PARTITION__%25%25", "p=x"}
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "p": None}, {"id": 2, "p": DEFAULT_PARTITION}, {"id": 3, "p": DEFAULT_PARTITION + "%"},
        {"id": 4, "p": "x"}]
    assert ids(t, filter=pc.field("p") == DEFAULT_PARTITION) == [2]
    assert ids(t, filter=pc.field("p") == DEFAULT_PARTITION + "%") == [3]
    assert ids(t, filter=pc.field("p").is_null()) == [1]


def test_overwriting_null_keeps_the_literal_and_the_other_way_round(tmp_path: Path) -> None:
    t = new_table(tmp_path)
    seed(t)
    t.write(pa.table({"id": [10], "p": [None]}, schema=SCHEMA), overwrite={"p": None})
    assert ids(t) == [2, 3, 4, 10]
    t.write(pa.table({"id": [20], "p": [DEFAULT_PARTITION]}, schema=SCHEMA), overwrite={"p": DEFAULT_PARTITION})
    assert ids(t) == [3, 4, 10, 20]
    t.write(pa.table({"id": [30], "p": [None]}, schema=SCHEMA), overwrite="dynamic")
    assert ids(t) == [3, 4, 20, 30]
    with pytest.raises(tablestore.InvalidWriteError):  # a null row is outside the literal's partition
        t.write(pa.table({"id": [40], "p": [None]}, schema=SCHEMA), overwrite={"p": DEFAULT_PARTITION})


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(LITERALS) | st.none() | st.text(max_size=30), min_size=1, max_size=20))
def test_rendering_is_one_to_one_and_inverted(values: list[str | None]) -> None:
    rendered = render_partition_column(pa.array(values, pa.string())).to_pylist()
    assert len(set(rendered)) == len(set(values))
    assert [partition_value(r, pa.string()).as_py() for r in rendered] == values
