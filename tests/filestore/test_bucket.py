"""The one bucket function (filestore.bucket): an on-disk contract shared with the log store."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pandas.util import hash_array

import tablestore
from filestore.bucket import bucket_of, bucket_of_key, key_hashes
from filestore.keycodec import KeyCodec
from filestore.siphash import hash_binary

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
GOLDEN_KEYS = pa.table({"id": pa.array([0, 1, 2, 42, -7, 2**40], pa.int64()),
                        "s": ["", "a", "order-1", "é", "x", "zz"]})


def test_golden_values_are_pinned() -> None:
    """Changing the hash moves every row of every existing table to another bucket: these must never change."""
    assert key_hashes(GOLDEN_KEYS, ["id"]).tolist() == [
        395581771677746567, 9500609536796456091, 16675658987647647324,
        4918759030899061930, 3577914828458798644, 1154705035641466285,
    ]
    assert bucket_of(GOLDEN_KEYS, ["id"], 4).tolist() == [3, 3, 0, 2, 0, 1]
    assert bucket_of(GOLDEN_KEYS, ["s"], 7).tolist() == [5, 1, 0, 0, 5, 5]
    assert bucket_of(GOLDEN_KEYS, ["id", "s"], 16).tolist() == [6, 1, 11, 11, 10, 6]


def test_deterministic_across_processes_and_hash_seeds() -> None:
    script = (
        "import json, pyarrow as pa\n"
        "from filestore.bucket import bucket_of\n"
        "t = pa.table({'id': pa.array(range(200), pa.int64()), 's': [str(i) * 3 for i in range(200)]})\n"
        "print(json.dumps(bucket_of(t, ['id', 's'], 5).tolist()))\n"
    )
    here = bucket_of(pa.table({"id": pa.array(range(200), pa.int64()), "s": [str(i) * 3 for i in range(200)]}),
                     ["id", "s"], 5).tolist()
    for seed in ("0", "12345"):
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                             env={**os.environ, "PYTHONHASHSEED": seed}, cwd=Path(__file__).resolve().parents[2])
        assert json.loads(out.stdout) == here


def test_one_bucket_means_bucket_zero() -> None:
    assert bucket_of(GOLDEN_KEYS, ["id"], 1).tolist() == [0] * GOLDEN_KEYS.num_rows
    assert bucket_of_key([5], [pa.int64()], 1) == 0


def test_rows_spread_across_buckets() -> None:
    n, buckets = 4000, 4
    table = pa.table({"id": pa.array(range(n), pa.int64())})
    counts = Counter(bucket_of(table, ["id"], buckets).tolist())
    assert set(counts) == set(range(buckets))
    assert all(abs(c - n / buckets) < 0.1 * n / buckets for c in counts.values()), counts


@SETTINGS
@given(
    st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(max_size=8)), min_size=1, max_size=30),
    st.integers(1, 17),
)
def test_bucket_of_key_equals_bucket_of(keys: list[tuple[int, str]], num_buckets: int) -> None:
    table = pa.table({"id": pa.array([k[0] for k in keys], pa.int64()), "s": [k[1] for k in keys]})
    vectorised = bucket_of(table, ["id", "s"], num_buckets).tolist()
    one_by_one = [bucket_of_key(list(k), [pa.int64(), pa.string()], num_buckets) for k in keys]
    assert vectorised == one_by_one
    assert all(0 <= b < num_buckets for b in vectorised)


@SETTINGS
@given(st.lists(st.integers(0, 20), min_size=1, max_size=60), st.integers(2, 6))
def test_equal_keys_get_equal_buckets(ids: list[int], num_buckets: int) -> None:
    table = pa.table({"id": pa.array(ids, pa.int64()), "other": list(range(len(ids)))})
    buckets = bucket_of(table, ["id"], num_buckets).tolist()
    seen: dict[int, int] = {}
    for key, b in zip(ids, buckets):
        assert seen.setdefault(key, b) == b


def _bucket_dirs_by_key(t: tablestore.Table, key: str) -> dict[object, set[str]]:
    found: dict[object, set[str]] = {}
    for f in Path(t.path).rglob("data-*"):
        for value in set(pq.read_table(f).column(key).to_pylist()):
            found.setdefault(value, set()).add(f.parent.name)
    return found


def test_all_rows_of_a_key_land_in_one_bucket_across_writes(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.int64())])
    t = cat.create_table("db.pk", schema=schema, primary_key=["id"], options={"bucket": "4", "write-only": "true"})
    for round_ in range(3):
        t.write(pa.table({"id": list(range(100)), "v": [round_] * 100}, schema=schema))
    t.write(pa.table({"id": list(range(0, 100, 3)), "v": [None] * 34, "_row_kind": ["-D"] * 34}))
    by_key = _bucket_dirs_by_key(t, "id")
    assert len(by_key) == 100
    assert all(len(dirs) == 1 for dirs in by_key.values())
    assert len({d for dirs in by_key.values() for d in dirs}) == 4
    expected_bucket = bucket_of(pa.table({"id": pa.array(range(100), pa.int64())}), ["id"], 4).tolist()
    assert {k: dirs.pop() for k, dirs in by_key.items()} == {i: f"bucket-{b}" for i, b in enumerate(expected_bucket)}


def test_without_primary_key_the_whole_row_is_the_bucket_key(tmp_path: Path) -> None:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    schema = pa.schema([("a", pa.int64()), ("b", pa.string())])
    t = cat.create_table("db.rows", schema=schema, options={"bucket": "3", "write-only": "true"})
    data = pa.table({"a": [1, 1, 1, 2, 2] * 10, "b": ["x", "y", "x", "x", "y"] * 10}, schema=schema)
    t.write(data)
    t.write(data)
    placed: dict[tuple[object, object], set[str]] = {}
    for f in Path(t.path).rglob("data-*"):
        stored = pq.read_table(f)
        for a, b in zip(stored.column("a").to_pylist(), stored.column("b").to_pylist()):
            placed.setdefault((a, b), set()).add(f.parent.name)
    assert all(len(dirs) == 1 for dirs in placed.values())
    assert t.read().num_rows == 100


def _pandas_hashes(table: pa.Table, key_columns: list[str]) -> list[int]:
    """The definition: pandas' hash_array of the key bytes as Python bytes objects."""
    codec = KeyCodec([table.column(c).type for c in key_columns])
    encoded = codec.encode_columns([table.column(c) for c in key_columns])
    return hash_array(np.asarray(encoded.to_numpy(zero_copy_only=False), dtype=object), categorize=False).tolist()


@SETTINGS
@given(st.lists(st.binary(max_size=40), max_size=40), st.integers(0, 24), st.integers(0, 5))
def test_numpy_siphash_equals_pandas(values: list[bytes], width: int, offset: int) -> None:
    """Values of one length (numpy) and of mixed lengths (pandas), sliced arrays too: pandas' hash, bit for bit."""
    fixed = [(v * (width + 1))[:width] if v else b"\x07" * width for v in values]
    for array in (pa.array(values, pa.binary()), pa.array(fixed, pa.binary())):
        array = array.slice(min(offset, len(array)))
        expected = hash_array(np.asarray(array.to_pylist(), dtype=object), categorize=False).tolist()
        assert hash_binary(array).tolist() == expected


@SETTINGS
@given(st.data())
def test_fixed_width_keys_hash_as_pandas(data: st.DataObject) -> None:
    n = data.draw(st.integers(1, 50))
    ints = st.lists(st.integers(-(2**31), 2**31 - 1), min_size=n, max_size=n)
    floats = st.lists(st.floats(width=64), min_size=n, max_size=n)
    table = pa.table({
        "i": pa.array(data.draw(ints), pa.int32()),
        "f": pa.array(data.draw(floats), pa.float64()),
        "d": pa.array(data.draw(ints), pa.int32()).cast(pa.date32()),
        "b": pa.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n))),
        "n": pa.array(data.draw(st.lists(st.one_of(st.none(), st.integers(0, 9)), min_size=n, max_size=n)),
                      pa.int64()),
    })
    for keys in (["i"], ["f"], ["d", "b"], ["i", "f", "d"], ["n"], ["n", "i"]):
        assert key_hashes(table, keys).tolist() == _pandas_hashes(table, keys)


@SETTINGS
@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=300),
       st.sampled_from([pa.int64(), pa.int32(), pa.int16(), pa.int8(), pa.date32(), pa.date64(), pa.time32("s"),
                        pa.time64("us"), pa.timestamp("ms"), pa.timestamp("ns", tz="UTC"), pa.duration("s")]),
       st.integers(0, 5))
def test_integer_keys_hash_from_their_values_as_from_their_key_bytes(values: list[int], key_type: pa.DataType,
                                                                       offset: int) -> None:
    """A one-column integer-like key is hashed from its values: the same hash as pandas' of its key bytes (the
    general path), for every width, temporal types, chunked columns and sliced arrays."""
    storage = pa.int64() if key_type.bit_width == 64 else {8: pa.int8(), 16: pa.int16(), 32: pa.int32()}[
        key_type.bit_width]
    info = np.iinfo(storage.to_pandas_dtype())
    raw = pa.array([min(max(v, int(info.min)), int(info.max)) for v in values], storage)
    if pa.types.is_time32(key_type):
        raw = pa.array([abs(v) % 86_400 for v in raw.to_pylist()], storage)
    elif pa.types.is_time64(key_type):
        raw = pa.array([abs(v) % 86_400_000_000 for v in raw.to_pylist()], storage)
    column = pa.chunked_array([raw.slice(0, offset), raw.slice(offset)]).cast(key_type) if offset < len(raw) \
        else pa.chunked_array([raw]).cast(key_type)
    table = pa.table({"k": column})
    encoded = KeyCodec([key_type]).encode_columns([column])
    assert key_hashes(table, ["k"]).tolist() == hash_array(
        np.asarray(encoded.to_pylist(), dtype=object), categorize=False).tolist()
    assert key_hashes(table, ["k"]).tolist() == hash_binary(encoded).tolist()
