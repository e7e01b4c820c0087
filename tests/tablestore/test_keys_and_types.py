"""Issue 11 items 2 and 4: float keys equal to themselves (NaN, -0.0) wherever keys are compared, and writes cast
only where no value changes meaning."""
from __future__ import annotations

import datetime as dt
import math
import re
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore import SchemaMismatchError

NAN = float("nan")


def table(tmp_path: Path, schema: pa.Schema, pk: list[str] | None, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table("db.t", schema=schema, primary_key=pk, options={"bucket": "3", **options})


def rows(t: tablestore.Table) -> list[tuple[object, ...]]:
    got = t.read().to_pylist()
    return sorted((tuple("nan" if isinstance(v, float) and math.isnan(v) else v for v in r.values()) for r in got),
                  key=repr)


# -- item 2: NaN and -0.0 keys -----------------------------------------------------------------------------------
KEYED = pa.schema([pa.field("id", pa.float64(), nullable=False), ("v", pa.int64())])


@pytest.mark.parametrize("full", [False, True])
def test_a_nan_key_is_upserted_and_deleted(tmp_path: Path, full: bool) -> None:
    t = table(tmp_path, KEYED, ["id"], **{"write-only": "true"})
    t.write(pa.table({"id": [NAN, 1.0], "v": [1, 1]}, schema=KEYED))
    t.write(pa.table({"id": [NAN], "v": [2]}, schema=KEYED))
    assert rows(t) == [("nan", 2), (1.0, 1)]
    t.compact(full=full)
    assert rows(t) == [("nan", 2), (1.0, 1)]
    t.write(pa.table({"_row_kind": ["-D"], "id": [NAN], "v": [None]}))
    assert rows(t) == [(1.0, 1)]
    t.compact(full=True)
    assert rows(t) == [(1.0, 1)]


def test_nans_with_other_payloads_and_negative_zero_are_the_same_keys(tmp_path: Path) -> None:
    t = table(tmp_path, KEYED, ["id"])
    other_nan = pa.array([1], pa.int64()).view(pa.float64())  # not a NaN: make one with a different payload
    payload_nan = pa.array([0x7FF8000000000ABC], pa.uint64()).view(pa.float64())
    assert math.isnan(payload_nan[0].as_py()) and not math.isnan(other_nan[0].as_py())
    t.write(pa.table({"id": pa.concat_arrays([payload_nan, pa.array([-0.0])]), "v": [1, 1]}, schema=KEYED))
    t.write(pa.table({"id": [NAN, 0.0], "v": [2, 2]}, schema=KEYED))
    assert rows(t) == [("nan", 2), (0.0, 2)]
    t.write(pa.table({"id": [-0.0, NAN], "v": [3, 3], "_row_kind": ["+U", "-D"]}))
    assert rows(t) == [(0.0, 3)]


def test_nan_rows_of_a_table_without_primary_key_are_counted_and_retracted(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.float32()), ("v", pa.int64())])
    t = table(tmp_path, schema, None)
    t.write(pa.table({"x": [NAN, NAN, -0.0], "v": [1, 1, 1]}, schema=schema))
    t.write(pa.table({"_row_kind": ["-D", "-D"], "x": pa.array([NAN, 0.0], pa.float32()), "v": [1, 1]}))
    assert rows(t) == [("nan", 1)]
    t.compact(full=True)
    assert rows(t) == [("nan", 1)]


# -- item 4: casts on write --------------------------------------------------------------------------------------
TYPED = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string()), ("n", pa.int32()),
                   ("f", pa.float32()), ("ts", pa.timestamp("ms")), ("b", pa.bool_())])


def one(**values: pa.Array) -> pa.Table:
    base = {"id": pa.array([1], pa.int64()), "s": pa.array(["a"]), "n": pa.array([1], pa.int32()),
            "f": pa.array([1.0], pa.float32()), "ts": pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("ms")),
            "b": pa.array([True])}
    return pa.table({**base, **values})


@pytest.mark.parametrize(("column", "value", "source"), [
    ("s", pa.array([12345]), "int64"),
    ("s", pa.array([True]), "bool"),
    ("s", pa.array([dt.datetime(2024, 1, 1)]), "timestamp[us]"),
    ("n", pa.array(["6"]), "string"),
    ("n", pa.array([300_000_000_000]), "int64"),
    ("n", pa.array([1.5]), "double"),
    ("n", pa.array([True]), "bool"),
    ("f", pa.array([0.1]), "double"),
    ("f", pa.array([1e300]), "double"),
    ("ts", pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 1)]), "timestamp[us]"),
    ("ts", pa.array([dt.datetime(2024, 1, 1)], pa.timestamp("ms", tz="UTC")), "timestamp[ms, tz=UTC]"),
    ("ts", pa.array(["2024-01-01"]), "string"),
    ("b", pa.array([1]), "int64"),
    ("b", pa.array(["true"]), "string"),
])
def test_casts_that_change_meaning_are_refused(tmp_path: Path, column: str, value: pa.Array, source: str) -> None:
    t = table(tmp_path, TYPED, ["id"])
    target = str(TYPED.field(column).type)
    expected = f"column {column!r} has type {source}, the table's type is {target}"
    with pytest.raises(SchemaMismatchError, match=re.escape(expected)):
        t.write(one(**{column: value}))
    assert t.latest_snapshot_id() is None


def test_casts_that_keep_every_value_are_made(tmp_path: Path) -> None:
    t = table(tmp_path, TYPED, ["id"])
    t.write(pa.table({
        "id": pa.array([7], pa.int8()), "s": pa.array(["x"], pa.large_string()), "n": pa.array([5], pa.int64()),
        "f": pa.array([0.5], pa.float64()), "ts": pa.array([dt.datetime(2024, 1, 1, 0, 0, 1)], pa.timestamp("s")),
        "b": pa.array([None], pa.null()),
    }))
    t.write(pa.table({"id": [8], "s": pa.array(["y"]).dictionary_encode(), "n": pa.array([2.0]),
                      "f": pa.array([3], pa.int64()), "ts": pa.array([None], pa.timestamp("ns")),
                      "b": pa.array([False])}))
    assert sorted(t.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 7, "s": "x", "n": 5, "f": 0.5, "ts": dt.datetime(2024, 1, 1, 0, 0, 1), "b": None},
        {"id": 8, "s": "y", "n": 2, "f": 3.0, "ts": None, "b": False},
    ]
