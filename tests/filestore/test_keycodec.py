"""Order preservation, round trips and the vectorised path of the key codec (filestore.keycodec)."""
from __future__ import annotations

import datetime as dt
import decimal
import math
import pickle
import struct
from collections.abc import Callable
from typing import Any, Literal

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from filestore.errors import FileStoreError
from filestore.keycodec import KeyCodec, KeyCodecError, decode_value, encode_value

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

I64 = (-(2**63), 2**63 - 1)
# Stored-integer bounds inside which .as_py() gives a value (datetime years 1..9999 with a day of
# margin for time zones; pandas Timestamp/Timedelta for nanoseconds, whose minimum int64 is NaT).
_SECONDS = (-62135596800 + 86400, 253402300799 - 86400)
TEMPORAL_BOUNDS: dict[pa.DataType, tuple[int, int]] = {
    pa.date32(): (-719162, 2932896),
    pa.time32("s"): (0, 86399),
    pa.time32("ms"): (0, 86399999),
    pa.time64("us"): (0, 86399999999),
    pa.duration("s"): (-(10**13), 10**13),
    pa.duration("ms"): (-(10**16), 10**16),
    pa.duration("us"): (I64[0] + 86400 * 10**6, I64[1] - 86400 * 10**6),  # pyarrow overflows converting the extremes back
    pa.duration("ns"): (I64[0] + 1, I64[1]),
}
for _tz in (None, "UTC", "Asia/Kolkata"):
    TEMPORAL_BOUNDS[pa.timestamp("s", _tz)] = _SECONDS
    TEMPORAL_BOUNDS[pa.timestamp("ms", _tz)] = (_SECONDS[0] * 10**3, _SECONDS[1] * 10**3)
    TEMPORAL_BOUNDS[pa.timestamp("us", _tz)] = (_SECONDS[0] * 10**6, _SECONDS[1] * 10**6)
    TEMPORAL_BOUNDS[pa.timestamp("ns", _tz)] = (I64[0] + 86400 * 10**9, I64[1] - 86400 * 10**9)

DECIMALS = [pa.decimal32(7, 2), pa.decimal64(18, 0), pa.decimal128(38, 10), pa.decimal128(5, -2), pa.decimal256(76, 30)]
INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
FLOATS: dict[pa.DataType, Literal[16, 32, 64]] = {pa.float16(): 16, pa.float32(): 32, pa.float64(): 64}
BYTES = [pa.string(), pa.large_string(), pa.string_view(), pa.binary(), pa.large_binary(), pa.binary_view()]
OTHER = [pa.bool_(), pa.binary(3), pa.date64(), pa.time64("ns")]
ALL_TYPES = INTS + list(FLOATS) + DECIMALS + BYTES + OTHER + list(TEMPORAL_BOUNDS)


def _as_py(stored: int, t: pa.DataType) -> Any:
    storage = pa.int32() if t.bit_width == 32 else pa.int64()
    return pa.array([stored], storage).view(t)[0].as_py()


def values_of(t: pa.DataType) -> st.SearchStrategy[Any]:
    """Non-null Python values of type t, as .as_py() gives them."""
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_integer(t):
        bits = t.bit_width
        if pa.types.is_signed_integer(t):
            return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
        return st.integers(0, 2**bits - 1)
    if t in FLOATS:
        return st.floats(width=FLOATS[t])
    if pa.types.is_decimal(t):
        limit = 10**t.precision - 1
        ctx = decimal.Context(prec=100)
        return st.integers(-limit, limit).map(lambda n: decimal.Decimal(n).scaleb(-t.scale, ctx))
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return st.text(alphabet=st.sampled_from("\x00\x01a\xff\u20ac\U0001f600") | st.characters(codec="utf-8"), max_size=8)
    if pa.types.is_fixed_size_binary(t):
        return st.binary(min_size=t.byte_width, max_size=t.byte_width)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return st.binary(max_size=8)
    if t == pa.date64():
        return st.dates()
    if t == pa.time64("ns"):  # .as_py() keeps microseconds only: stay on them
        return st.integers(0, 86399999999).map(lambda us: _as_py(us * 1000, t))
    low, high = TEMPORAL_BOUNDS[t]
    return st.integers(low, high).map(lambda n: _as_py(n, t))


def nullable(t: pa.DataType) -> st.SearchStrategy[Any]:
    return st.none() | values_of(t)


def order_key(v: Any) -> tuple[Any, ...]:
    """The expected order: null first, floats in total order (-0.0 < 0.0 < NaN)."""
    if v is None:
        return (0,)
    if isinstance(v, float):
        return (1, 1) if math.isnan(v) else (1, 0, v, math.copysign(1.0, v))
    return (1, 0, v)


def _sign(x: Any, y: Any) -> int:
    return (x > y) - (x < y)


def assert_order_preserved(values: list[Any], keys: list[bytes], key: Callable[[Any], Any]) -> None:
    for a, ka in zip(values, keys):
        for b, kb in zip(values, keys):
            assert _sign(ka, kb) == _sign(key(a), key(b)), (a, b, ka.hex(), kb.hex())


def same(a: Any, b: Any) -> bool:
    return order_key(a) == order_key(b)


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
@SETTINGS
@given(data=st.data())
def test_single_field_order_and_round_trip(t: pa.DataType, data: st.DataObject) -> None:
    values = data.draw(st.lists(nullable(t), min_size=1, max_size=12))
    keys = [encode_value(v, t) for v in values]
    assert_order_preserved(values, keys, order_key)
    for v, k in zip(values, keys):
        assert same(decode_value(k, t), v)
    assert sorted(keys) == [encode_value(v, t) for v in sorted(values, key=order_key)]


@SETTINGS
@given(data=st.data())
def test_composite_keys_keep_tuple_order(data: st.DataObject) -> None:
    types = data.draw(st.lists(st.sampled_from(ALL_TYPES), min_size=1, max_size=3))
    codec = KeyCodec(types)
    row = st.tuples(*(nullable(t) for t in types))
    rows = data.draw(st.lists(row, min_size=1, max_size=12))
    keys = [codec.encode(r) for r in rows]
    assert_order_preserved(rows, keys, lambda r: tuple(order_key(v) for v in r))
    for r, k in zip(rows, keys):
        assert all(same(a, b) for a, b in zip(codec.decode(k), r))


@pytest.mark.parametrize("t", [pa.string(), pa.large_string(), pa.string_view()], ids=str)
def test_string_prefixes_sort_first(t: pa.DataType) -> None:
    ordered = [None, "", "\x00", "\x00\x00", "\x00\x01", "a", "a\x00", "a\x00b", "a\x01", "ab", "b", "\xff", "\U0001f600"]
    keys = [encode_value(v, t) for v in ordered]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [decode_value(k, t) for k in keys] == ordered


def test_binary_prefixes_inside_composite_keys() -> None:
    codec = KeyCodec([pa.binary(), pa.int32()])
    rows = [(None, 5), (b"a", -1), (b"a", 7), (b"a\x00", -9), (b"a\x00\xff", 0), (b"a\x01", 0), (b"ab", -(2**31))]
    keys = [codec.encode(r) for r in rows]
    assert keys == sorted(keys)
    assert [codec.decode(k) for k in keys] == rows


@pytest.mark.parametrize("t", list(FLOATS), ids=str)
def test_float_total_order(t: pa.DataType) -> None:
    tiny = {16: 2.0**-24, 32: 2.0**-149, 64: 5e-324}[FLOATS[t]]
    big = {16: 65504.0, 32: 3.4028234663852886e38, 64: 1.7976931348623157e308}[FLOATS[t]]
    ordered = [-math.inf, -big, -1.0, -tiny, -0.0, 0.0, tiny, 1.0, big, math.inf, math.nan]
    keys = [encode_value(v, t) for v in ordered]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [repr(decode_value(k, t)) for k in keys] == [repr(v) for v in ordered]


def test_every_nan_has_one_encoding() -> None:
    nans = [struct.unpack(">d", bytes.fromhex(h))[0] for h in ("7ff8000000000000", "fff8000000000000", "7ff0000000000001")]
    assert all(math.isnan(n) for n in nans)
    assert len({encode_value(n, pa.float64()) for n in nans}) == 1
    column = KeyCodec([pa.float64()]).encode_columns([pa.array(nans, pa.float64())])
    assert set(column.to_pylist()) == {encode_value(math.nan, pa.float64())}


@pytest.mark.parametrize(
    ("t", "low", "high"),
    [(pa.int64(), -(2**63), 2**63 - 1), (pa.int8(), -128, 127), (pa.uint64(), 0, 2**64 - 1)],
    ids=str,
)
def test_integer_extremes(t: pa.DataType, low: int, high: int) -> None:
    ordered = [None, low, low + 1, -1 if low else 1, high - 1, high]
    keys = [encode_value(v, t) for v in ordered]
    assert keys == sorted(keys)
    assert [decode_value(k, t) for k in keys] == ordered
    for outside in (low - 1, high + 1):
        with pytest.raises(KeyCodecError):
            encode_value(outside, t)


@pytest.mark.parametrize("t", [pa.decimal128(20, 4), pa.decimal256(60, 4)], ids=str)
def test_decimals_of_every_magnitude_and_sign(t: pa.DataType) -> None:
    texts = ["-9999999999999999.9999", "-100", "-99.9999", "-1", "-0.0001", "0", "0.0001", "0.1", "1", "99.9999", "100"]
    ordered = [decimal.Decimal(s) for s in texts]
    keys = [encode_value(v, t) for v in ordered]
    assert keys == sorted(keys) and len(set(keys)) == len(keys)
    assert [decode_value(k, t) for k in keys] == ordered
    assert encode_value(decimal.Decimal("1.5"), t) == encode_value(decimal.Decimal("1.5000"), t)
    assert encode_value(7, t) == encode_value(decimal.Decimal("7.00"), t)
    for bad in (decimal.Decimal("0.00001"), decimal.Decimal("NaN"), 1.5, decimal.Decimal(10) ** (t.precision - t.scale)):
        with pytest.raises(KeyCodecError):
            encode_value(bad, t)


def _table_columns(data: st.DataObject, types: list[pa.DataType]) -> list[pa.Array | pa.ChunkedArray]:
    n = data.draw(st.integers(0, 15))
    columns: list[pa.Array | pa.ChunkedArray] = []
    for t in types:
        values = data.draw(st.lists(nullable(t), min_size=n + 2, max_size=n + 2))
        array = pa.array(values, t)[1 : n + 1]  # a slice: non-zero offsets into the buffers
        cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
        if cuts:
            bounds = [0, *cuts, n]
            columns.append(pa.chunked_array([array[a:b] for a, b in zip(bounds, bounds[1:])], t))
        else:
            columns.append(array)
    return columns


@SETTINGS
@given(data=st.data())
def test_encode_columns_equals_per_row_encode(data: st.DataObject) -> None:
    types = data.draw(st.lists(st.sampled_from(ALL_TYPES), min_size=1, max_size=3))
    codec = KeyCodec(types)
    columns = _table_columns(data, types)
    encoded = codec.encode_columns(columns)
    assert encoded.type == pa.binary()
    expected = [codec.encode([c[i].as_py() for c in columns]) for i in range(len(columns[0]))]
    assert encoded.to_pylist() == expected


def test_encode_columns_decodes_dictionaries_and_checks_its_input() -> None:
    codec = KeyCodec([pa.string()])
    dictionary = pa.array(["b", None, "a"]).dictionary_encode()
    assert codec.encode_columns([dictionary]).to_pylist() == [codec.encode([v]) for v in ["b", None, "a"]]
    with pytest.raises(KeyCodecError, match="int64"):
        codec.encode_columns([pa.array([1])])
    with pytest.raises(KeyCodecError):
        KeyCodec([pa.int8(), pa.int8()]).encode_columns([pa.array([1], pa.int8()), pa.array([1, 2], pa.int8())])


@SETTINGS
@given(
    value=st.datetimes(
        min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30), timezones=st.one_of(st.none(), st.timezones())
    ),
    unit=st.sampled_from(["s", "ms", "us", "ns"]),
    tz=st.sampled_from([None, "UTC", "America/New_York"]),
)
def test_python_datetimes_are_keyed_like_pyarrow_stores_them(value: dt.datetime, unit: str, tz: str | None) -> None:
    t = pa.timestamp(unit, tz)
    if unit == "ns" and not dt.datetime(1678, 1, 1) <= value.replace(tzinfo=None) <= dt.datetime(2261, 12, 31):
        return
    column = KeyCodec([t]).encode_columns([pa.array([value], t)])
    assert column[0].as_py() == encode_value(value, t)


@SETTINGS
@given(
    value=st.one_of(st.dates(), st.times(), st.timedeltas(min_value=dt.timedelta(days=-10**5), max_value=dt.timedelta(days=10**5))),
    unit=st.sampled_from(["s", "ms", "us", "ns"]),
)
def test_other_python_temporals_are_keyed_like_pyarrow_stores_them(value: Any, unit: str) -> None:
    if isinstance(value, dt.date):
        types = [pa.date32(), pa.date64()]
    elif isinstance(value, dt.time):
        types = [pa.time32(unit)] if unit in ("s", "ms") else [pa.time64(unit)]
    else:
        types = [pa.duration(unit)]
    for t in types:
        assert KeyCodec([t]).encode_columns([pa.array([value], t)])[0].as_py() == encode_value(value, t)


def test_temporal_fields_accept_their_stored_integer() -> None:
    t = pa.timestamp("ns", "UTC")
    assert encode_value(1, t) == encode_value(_as_py(1, t), t)
    assert decode_value(encode_value(86_400_000_000_001, t), t) == _as_py(86_400_000_000_001, t)


@pytest.mark.parametrize(
    "t",
    [pa.list_(pa.int32()), pa.struct([("a", pa.int32())]), pa.map_(pa.string(), pa.int32()), pa.null(),
     pa.dictionary(pa.int32(), pa.string())],
    ids=str,
)
def test_unsupported_types_raise_naming_the_type(t: pa.DataType) -> None:
    with pytest.raises(KeyCodecError, match=str(t).replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")) as info:
        KeyCodec([pa.int32(), t])
    assert isinstance(info.value, FileStoreError) and info.value.type == t


@pytest.mark.parametrize(
    ("types", "data"),
    [([pa.int32()], b"\x01\x00\x00"), ([pa.int32()], b"\x02"), ([pa.int8()], b"\x00\x00"),
     ([pa.string()], b"\x01ab\x00"), ([pa.string()], b"\x01\xff\xfe\x00\x00"), ([pa.bool_()], b"\x01\x02"),
     ([pa.int8(), pa.int8()], b"\x00"), ([pa.decimal128(5, 1)], b"\x01\x00")],
)
def test_corrupt_keys_raise(types: list[pa.DataType], data: bytes) -> None:
    with pytest.raises(KeyCodecError):
        KeyCodec(types).decode(data)


def test_bad_values_raise() -> None:
    codec = KeyCodec([pa.int32(), pa.string()])
    for row in ([1.5, "a"], ["1", "a"], [1, b"a"], [1], [1, "a", 2]):
        with pytest.raises(KeyCodecError):
            codec.encode(row)
    with pytest.raises(KeyCodecError):
        encode_value(b"ab", pa.binary(3))
    with pytest.raises(KeyCodecError):
        encode_value("\ud800", pa.string())  # a lone surrogate is not UTF-8
    with pytest.raises(KeyCodecError):
        KeyCodec([])


def test_codec_is_immutable_and_picklable() -> None:
    codec = KeyCodec([pa.int64(), pa.timestamp("us", "UTC"), pa.string()])
    copy = pickle.loads(pickle.dumps(codec))
    assert copy == codec and hash(copy) == hash(codec) and copy.types == codec.types
    row = (3, dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc), "x")
    assert copy.encode(row) == codec.encode(row)
    with pytest.raises(AttributeError):
        codec.types = ()  # type: ignore[misc]
