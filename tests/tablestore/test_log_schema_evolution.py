"""The log across a schema change (real broker): records written before `add_column` / `alter_column_type` read
back with null in the added column and the widened value, records after with the new column, in every log format;
a reader started before a column was added keeps reading (the fields it does not know are left out)."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import tablestore
from log_helpers import changes, drop_created_tables, kafka_catalog

pytestmark = pytest.mark.kafka

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("qty", pa.int32()),
                    pa.field("price", pa.float32())])


@pytest.fixture(autouse=True)
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


def all_changes(t: tablestore.Table) -> list[tuple[str, dict[str, Any]]]:
    return changes(t.read_changes(scan="from-timestamp", timestamp_ms=0, timeout_s=1.0))


@pytest.mark.parametrize("fmt,mode", [("debezium-json", "all"), ("debezium-avro", "all"), ("debezium-avro", "upsert"),
                                      ("upsert", "upsert")])
def test_log_round_trip_across_an_alter(tmp_path: Path, kafka_bootstrap: str, fmt: str, mode: str) -> None:
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"],
                         options={"bucket": "2", "log.format": fmt, "log.changelog-mode": mode})
    before = cat.get_table("db.t")   # a handle loaded before the change
    t.write(pa.table({"id": [1, 2], "qty": pa.array([1, 2], pa.int32()), "price": pa.array([0.5, 1.5], pa.float32())}))
    t.add_column("note", pa.string())
    t.alter_column_type("qty", pa.int64())
    t.alter_column_type("price", pa.float64())
    t.write(pa.table({"id": [2, 3], "qty": [2**40, 3], "price": [2.5, 1e300], "note": ["x", None]}))
    stale = before.log_writer()   # a session of the old handle still writes schema 0's records
    stale.write(pa.table({"id": [4], "qty": pa.array([4], pa.int32()), "price": pa.array([4.0], pa.float32())}))
    stale.commit()
    stale.close()

    got = all_changes(cat.get_table("db.t"))   # read by a handle loaded after the change
    assert all(set(r) == {"id", "qty", "price", "note"} for _, r in got)
    final = {}
    for kind, r in got:
        if kind in ("+I", "+U"):
            final[r["id"]] = r
        elif kind == "-D":
            final.pop(r["id"], None)
    assert final == {1: {"id": 1, "qty": 1, "price": 0.5, "note": None},
                     2: {"id": 2, "qty": 2**40, "price": 2.5, "note": "x"},
                     3: {"id": 3, "qty": 3, "price": 1e300, "note": None},
                     4: {"id": 4, "qty": 4, "price": 4.0, "note": None}}
    assert final == {r["id"]: r for r in t.read().to_pylist()}



def test_reader_started_before_the_change_keeps_reading(tmp_path: Path, kafka_bootstrap: str) -> None:
    for fmt in ("debezium-json", "debezium-avro", "upsert"):
        cat = kafka_catalog(tmp_path / fmt, kafka_bootstrap)
        t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": "1", "log.format": fmt})
        reader = cat.get_table("db.t").read_changes(scan="latest", timeout_s=1.0)
        t.write(pa.table({"id": [1], "qty": pa.array([1], pa.int32()), "price": pa.array([0.5], pa.float32())}))
        t.add_column("note", pa.string())
        t.write(pa.table({"id": [2], "qty": pa.array([2], pa.int32()), "price": pa.array([2.5], pa.float32()),
                          "note": ["x"]}))
        got = changes(reader)
        assert [r for _, r in got] == [{"id": 1, "qty": 1, "price": 0.5}, {"id": 2, "qty": 2, "price": 2.5}], fmt
        assert [k for k, _ in got] == ["+I", "+I"], fmt


@pytest.mark.parametrize("fmt,mode", [("debezium-json", "all"), ("debezium-avro", "all"), ("upsert", "upsert")])
def test_log_across_a_rename_and_a_drop(tmp_path: Path, kafka_bootstrap: str, fmt: str, mode: str) -> None:
    """The log is encoded by column names: records logged after RENAME COLUMN / DROP COLUMN carry the new schema;
    those logged before decode under it with the renamed column null (its old name is not the new one) and the
    dropped column left out. The table itself reads the renamed column's values (by column id)."""
    cat = kafka_catalog(tmp_path, kafka_bootstrap)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"],
                         options={"bucket": "1", "log.format": fmt, "log.changelog-mode": mode})
    t.write(pa.table({"id": [1], "qty": pa.array([1], pa.int32()), "price": pa.array([0.5], pa.float32())}))
    t.rename_column("qty", "amount")
    t.drop_column("price")
    t.write(pa.table({"id": [2], "amount": pa.array([2], pa.int32())}))
    got = [r for _, r in all_changes(cat.get_table("db.t"))]
    assert got == [{"id": 1, "amount": None}, {"id": 2, "amount": 2}]
    assert {r["id"]: r for r in t.read().to_pylist()} == {1: {"id": 1, "amount": 1}, 2: {"id": 2, "amount": 2}}
