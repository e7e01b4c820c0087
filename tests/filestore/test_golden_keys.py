"""The file store's key rules against their golden vectors (tests/data/golden/keys.json), which the Spark jar's
Java twins are held to as well (tests/java/GoldenKeys.java, run by tests/tablestore/spark/test_spark_golden.py):
the key bytes of each case, its 64-bit hash and its bucket for several bucket counts, by the per-key and the
vectorised paths."""
from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from filestore.bucket import bucket_of, bucket_of_key, key_hashes
from filestore.keycodec import KeyCodec

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden" / "keys.json"
CASES: list[dict[str, Any]] = json.loads(GOLDEN.read_text())["cases"]


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type pyarrow prints as `name` (the form the Spark jar's bucket function names take)."""
    simple = {"bool": pa.bool_(), "float": pa.float32(), "double": pa.float64(), "string": pa.string(),
              "large_string": pa.large_string(), "binary": pa.binary(), "date32[day]": pa.date32(),
              "date64[ms]": pa.date64()}
    if name in simple:
        return simple[name]
    if name.startswith(("int", "uint")):
        return pa.type_for_alias(name)
    if name.startswith("decimal128("):
        precision, scale = name[len("decimal128("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    if name.startswith("timestamp["):
        unit, _, tz = name[len("timestamp["):-1].partition(", tz=")
        return pa.timestamp(unit, tz=tz or None)
    if name.startswith("fixed_size_binary["):
        return pa.binary(int(name[len("fixed_size_binary["):-1]))
    raise AssertionError(f"no Arrow type for {name!r}")


def column(t: pa.DataType, value: Any) -> pa.Array:
    """A one-value column of `t` from the value's stored JSON form."""
    if value is None:
        return pa.nulls(1, t)
    if pa.types.is_date32(t):
        return pa.array([value], pa.int32()).cast(t)
    if pa.types.is_date64(t) or pa.types.is_timestamp(t):
        return pa.array([value], pa.int64()).cast(t)
    if pa.types.is_floating(t):
        return pa.array([float(value)], t)
    if pa.types.is_decimal(t):
        return pa.array([Decimal(value)], t)
    if pa.types.is_binary(t) or pa.types.is_fixed_size_binary(t):
        return pa.array([bytes.fromhex(value)], t)
    return pa.array([value], t)


def case_id(case: dict[str, Any]) -> str:
    return "|".join(case["types"]) + "=" + json.dumps(case["values"], ensure_ascii=True)


def test_the_vectors_cover_every_key_type() -> None:
    kinds = {t for case in CASES for t in case["types"]}
    assert {"bool", "int8", "int64", "uint64", "float", "double", "decimal128(10, 2)", "date32[day]", "date64[ms]",
            "timestamp[ns]", "timestamp[us, tz=UTC]", "string", "binary", "fixed_size_binary[3]"} <= kinds
    assert any(len(case["types"]) > 1 for case in CASES) and any(None in case["values"] for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_golden_key(case: dict[str, Any]) -> None:
    types = [arrow_type(t) for t in case["types"]]
    names = [f"k{i}" for i in range(len(types))]
    table = pa.table({n: column(t, v) for n, t, v in zip(names, types, case["values"])})
    codec = KeyCodec(types)
    key = bytes.fromhex(case["key"])
    assert codec.encode_columns([table.column(n) for n in names])[0].as_py() == key
    assert codec.encode(table.to_pylist()[0].values()) == key   # the per-key path (point lookups, the materializer)
    assert codec.encode(codec.decode(key)) == key
    assert int(key_hashes(table, names)[0]) == int(case["hash"])
    for buckets, bucket in case["buckets"].items():
        assert int(bucket_of(table, names, int(buckets))[0]) == bucket
        assert bucket_of_key(list(table.to_pylist()[0].values()), types, int(buckets)) == bucket
