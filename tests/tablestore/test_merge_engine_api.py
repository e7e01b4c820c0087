"""Merge engines through the Python API: create_table with the options, write, read, compact; the errors a user meets
for options that do not fit the schema; the changes of such a table without a log (from its snapshots, merged; with
a log: test_merge_engine_log.py);
a Spark write of such a table takes the Python writer."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from tablestore.snapshot_changes import snapshot_changes
from tablestore.spark.jvm_write import unusable_reason

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("qty", pa.int64()), ("name", pa.string()),
                    ("price", pa.float64()), ("ts", pa.int64())])


@pytest.fixture()
def cat(tmp_path: Path) -> tablestore.Catalog:
    c = tablestore.Catalog(str(tmp_path / "wh"))
    c.create_database("db")
    return c


def rows(t: tablestore.Table) -> list[dict[str, Any]]:
    return sorted(t.read().to_pylist(), key=lambda r: r["id"])


def write(t: tablestore.Table, data: list[dict[str, Any]]) -> None:
    t.write(pa.Table.from_pylist(data, schema=SCHEMA))


def test_partial_update_fills_columns_and_a_null_keeps_the_old_value(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.p", schema=SCHEMA, primary_key=["id"], options={"merge-engine": "partial-update"})
    write(t, [{"id": 1, "qty": 3, "name": None, "price": None, "ts": 1}])
    write(t, [{"id": 1, "qty": None, "name": "pen", "price": None, "ts": None},
              {"id": 2, "qty": 1, "name": None, "price": 2.5, "ts": 2}])
    write(t, [{"id": 1, "qty": None, "name": None, "price": 1.5, "ts": 3}])
    want = [{"id": 1, "qty": 3, "name": "pen", "price": 1.5, "ts": 3}, {"id": 2, "qty": 1, "name": None, "price": 2.5,
                                                                        "ts": 2}]
    assert rows(t) == want
    t.compact(full=True)
    assert rows(t) == want
    with pytest.raises(tablestore.RetractionNotSupportedError, match="partial-update"):
        t.write(pa.Table.from_pylist([{"id": 1, "qty": None, "name": None, "price": None, "ts": None}],
                                     schema=SCHEMA).add_column(0, "_row_kind", pa.array(["-D"])))


def test_aggregation_sums_counts_and_retracts(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.a", schema=SCHEMA, primary_key=["id"], options={
        "merge-engine": "aggregation", "fields.qty.aggregate-function": "sum",
        "fields.ts.aggregate-function": "count", "fields.price.aggregate-function": "last_value",
        "fields.name.aggregate-function": "last_value"})
    write(t, [{"id": 1, "qty": 3, "name": "a", "price": 1.0, "ts": 10}, {"id": 1, "qty": 4, "name": "b",
                                                                          "price": 2.0, "ts": None}])
    write(t, [{"id": 1, "qty": 5, "name": None, "price": 3.0, "ts": 11}])
    assert rows(t) == [{"id": 1, "qty": 12, "name": None, "price": 3.0, "ts": 2}]
    retract = pa.Table.from_pylist([{"id": 1, "qty": 5, "name": None, "price": 3.0, "ts": 11}], schema=SCHEMA)
    t.write(retract.add_column(0, "_row_kind", pa.array(["-U"])))
    assert rows(t) == [{"id": 1, "qty": 7, "name": None, "price": None, "ts": 1}]


def test_aggregation_refuses_a_retraction_its_function_cannot_take(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.m", schema=SCHEMA, primary_key=["id"], options={
        "merge-engine": "aggregation", "fields.qty.aggregate-function": "max"})
    write(t, [{"id": 1, "qty": 3, "name": "a", "price": 1.0, "ts": 10}])
    with pytest.raises(tablestore.RetractionNotSupportedError, match="'db.m'.*column 'qty'.*max") as raised:
        t.write(pa.Table.from_pylist([{"id": 1, "qty": 3, "name": "a", "price": 1.0, "ts": 10}],
                                     schema=SCHEMA).add_column(0, "_row_kind", pa.array(["-D"])))
    assert (raised.value.table, raised.value.column) == ("db.m", "qty")
    assert rows(t) == [{"id": 1, "qty": 3, "name": "a", "price": 1.0, "ts": 10}]


def test_first_row_keeps_the_first_row_of_each_key(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.f", schema=SCHEMA, primary_key=["id"], options={"merge-engine": "first-row"})
    write(t, [{"id": 1, "qty": 1, "name": "first", "price": None, "ts": 1}])
    write(t, [{"id": 1, "qty": 2, "name": "second", "price": None, "ts": 2},
              {"id": 2, "qty": 3, "name": "new", "price": None, "ts": 3}])
    t.compact(full=True)
    assert [r["name"] for r in rows(t)] == ["first", "new"]


def test_sequence_field_orders_rows_instead_of_arrival(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.s", schema=SCHEMA, primary_key=["id"], options={"sequence.field": "ts"})
    write(t, [{"id": 1, "qty": 1, "name": "newest", "price": None, "ts": 9}])
    write(t, [{"id": 1, "qty": 2, "name": "late but older", "price": None, "ts": 3}])
    assert [r["name"] for r in rows(t)] == ["newest"]
    t.write(pa.Table.from_pylist([{"id": 1, "qty": 2, "name": None, "price": None, "ts": 10}],
                                 schema=SCHEMA).add_column(0, "_row_kind", pa.array(["-D"])))
    t.compact(full=True)
    write(t, [{"id": 1, "qty": 2, "name": "older than the delete", "price": None, "ts": 4}])
    assert rows(t) == []


def test_changes_of_a_partial_update_table_carry_the_merged_rows(cat: tablestore.Catalog) -> None:
    """The table has no log: a stream reads its changes from its snapshots (what Spark's readStream does), which
    compares merged reads, so an update carries the merged row, not the partial one written."""
    t = cat.create_table("db.c", schema=SCHEMA, primary_key=["id"], options={"merge-engine": "partial-update"})
    write(t, [{"id": 1, "qty": 3, "name": "pen", "price": None, "ts": 1}])
    write(t, [{"id": 1, "qty": None, "name": None, "price": 1.5, "ts": None}])
    store = t._handle.store
    first, second = (store.snapshots.get(s.id) for s in t.snapshots()[:2])
    assert [r for c in snapshot_changes(store, first, second) for r in c.to_pylist()] == [
        {"_row_kind": "-U", "id": 1, "qty": 3, "name": "pen", "price": None, "ts": 1},
        {"_row_kind": "+U", "id": 1, "qty": 3, "name": "pen", "price": 1.5, "ts": 1},
    ]


@pytest.mark.parametrize("options, message", [
    ({"merge-engine": "partial-updat"}, "did you mean 'partial-update'"),
    ({"merge-engine": "aggregation", "fields.qtty.aggregate-function": "sum"}, "no column 'qtty' .*did you mean 'qty'"),
    ({"merge-engine": "aggregation", "fields.qty.aggregate-function": "summ"}, "did you mean 'sum'"),
    ({"merge-engine": "aggregation", "fields.id.aggregate-function": "sum"}, "'id' is part of the primary key"),
    ({"merge-engine": "aggregation", "fields.name.aggregate-function": "sum"}, "'name' is of type string"),
    ({"merge-engine": "aggregation", "fields.qty.aggregate-function": "bool_or"}, "bool_or needs a boolean"),
    ({"merge-engine": "partial-update", "fields.qty.aggregate-function": "sum"}, "apply to merge-engine aggregation"),
    ({"merge-engine": "first-row", "sequence.field": "ts"}, "first-row .* no sequence.field"),
    ({"merge-engine": "partial-update", "sequence.field": "ts"}, "partial-update takes no sequence.field"),
    ({"sequence.field": "tss"}, "no column 'tss' .*did you mean 'ts'"),
    ({"sequence.field": "id"}, "'id' is part of the primary key"),
    ({"merge-engine": "aggregation", "sequence.field": "ts"}, "column 'qty' aggregates with last_non_null_value"),
])
def test_merge_options_that_do_not_fit_are_refused_at_creation(cat: tablestore.Catalog, options: dict[str, str],
                                                               message: str) -> None:
    with pytest.raises(tablestore.InvalidOptionError, match=message):
        cat.create_table("db.bad", schema=SCHEMA, primary_key=["id"], options=options)
    assert not cat.table_exists("db.bad")


def test_a_merge_engine_needs_a_primary_key(cat: tablestore.Catalog) -> None:
    with pytest.raises(tablestore.MergeEngineOptionError, match="needs a primary key"):
        cat.create_table("db.nopk", schema=SCHEMA, options={"merge-engine": "first-row"})


def test_merge_engine_is_fixed_at_creation(cat: tablestore.Catalog) -> None:
    cat.create_table("db.fixed", schema=SCHEMA, primary_key=["id"], options={"merge-engine": "first-row"})
    with pytest.raises(tablestore.InvalidOptionError, match="fixed when the table is created"):
        cat.alter_table_options("db.fixed", {"merge-engine": "deduplicate"})


def test_spark_writes_of_a_merge_engine_table_take_the_python_writer(cat: tablestore.Catalog) -> None:
    plain = cat.create_table("db.plain", schema=SCHEMA, primary_key=["id"])
    merged = cat.create_table("db.pu", schema=SCHEMA, primary_key=["id"], options={"merge-engine": "partial-update"})
    assert unusable_reason(plain._handle.store) is None
    assert unusable_reason(merged._handle.store) == "merge-engine partial-update"


def test_columns_added_to_an_aggregation_table_take_the_default_function(cat: tablestore.Catalog) -> None:
    t = cat.create_table("db.grow", schema=SCHEMA, primary_key=["id"], options={
        "merge-engine": "aggregation", "fields.qty.aggregate-function": "sum"})
    write(t, [{"id": 1, "qty": 3, "name": "a", "price": 1.0, "ts": 10}])
    t.add_column("note", pa.string())
    t.write(pa.table({"id": [1, 1], "qty": [4, None], "note": ["x", None]}))
    assert [{k: r[k] for k in ("id", "qty", "name", "note")} for r in t.read().to_pylist()] == [
        {"id": 1, "qty": 7, "name": "a", "note": "x"}]
    ordered = cat.create_table("db.grow_by_ts", schema=SCHEMA, primary_key=["id"], options={
        "merge-engine": "aggregation", "sequence.field": "ts", **{f"fields.{c}.aggregate-function": "max"
                                                               for c in ("qty", "name", "price")}})
    with pytest.raises(tablestore.SchemaEvolutionError, match="last_non_null_value"):
        ordered.add_column("note", pa.string())
