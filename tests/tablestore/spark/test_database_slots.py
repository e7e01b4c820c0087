"""The shared slots `ingest-database` packs every table's changes into (tablestore/spark/database_decode.py): each
table's columns in slots of their own type, no two columns of a table in one slot, and no wider than the widest
table per type."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, strategies as st

from tablestore.spark.database_decode import slots

pytestmark = pytest.mark.version_independent   # no Spark: the layout's arithmetic

TYPES = ["string", "int", "bigint", "decimal(10,2)", "timestamp", "array<string>"]
tables_st = st.lists(st.lists(st.sampled_from(TYPES), max_size=12), min_size=1, max_size=8)


@given(tables_st)
def test_every_column_in_a_slot_of_its_type_and_no_slot_twice_in_a_table(tables: list[list[str]]) -> None:
    schemas = [[(f"c{j}", ddl) for j, ddl in enumerate(columns)] for columns in tables]
    types, layout = slots(schemas)
    for columns, placed in zip(schemas, layout):
        assert [name for name, _ in placed] == [name for name, _ in columns]
        assert [types[slot] for _, slot in placed] == [ddl for _, ddl in columns]
        assert len({slot for _, slot in placed}) == len(placed)


@given(tables_st)
def test_as_wide_as_the_widest_table_per_type_not_the_sum(tables: list[list[str]]) -> None:
    types, _ = slots([[(f"c{j}", ddl) for j, ddl in enumerate(columns)] for columns in tables])
    widest = Counter[str]()
    for columns in tables:
        for ddl, n in Counter(columns).items():
            widest[ddl] = max(widest[ddl], n)
    assert Counter(types) == widest


def test_twenty_tables_of_one_shape_take_one_tables_columns() -> None:
    shape = [("_row_kind", "string"), ("id", "bigint"), ("name", "string"), ("price", "decimal(10,2)")]
    types, layout = slots([shape] * 20)
    assert types == ["string", "bigint", "string", "decimal(10,2)"]
    assert set(layout) == {(("_row_kind", 0), ("id", 1), ("name", 2), ("price", 3))}
