"""The one order-preserving binary key codec of the project (the idea of Flink's FLIP-220).

Invariants, for values a, b of one Arrow type T (and for tuples of values of given types):
  * encode(a) < encode(b) as Python bytes   exactly when a < b in T's order;
  * encode(a) == encode(b)                  exactly when a == b;
  * decode(encode(a)) == a (as pyarrow's `.as_py()` gives values of T);
  * every field is self-delimiting, so a composite key is the plain concatenation of its
    fields and compares lexicographically, field by field; a null sorts before every value.
Keys of different types (or of timestamps with different units) are not comparable.

BYTE LAYOUT -- ON-DISK FORMAT: manifests store min/max keys in it. Never change an existing
layout; a new type gets a new entry here.
  Every field starts with one marker byte:
    0x00  null; nothing follows
    0x01  not null; the payload follows
  Payload by type (N = byte width):
    bool                        1 byte, 0x00 false, 0x01 true
    int8/16/32/64               N big-endian bytes of the two's complement, sign bit flipped
    uint8/16/32/64              N big-endian bytes
    float16/32/64               IEEE-754 bits big-endian; sign bit 0: set it; sign bit 1: invert
                                every bit; every NaN: N bytes 0xFF. Total order:
                                -inf < negatives < -0.0 < 0.0 < positives < +inf < NaN
    decimal32/64/128/256        the unscaled integer (the scale is the type's), N = 4/8/16/32,
                                laid out as the signed ints
    date32, time32              the stored int32 (days; seconds or milliseconds), as int32
    date64, timestamp, time64,  the stored int64 (unit and time zone are not encoded), as int64
    duration
    fixed_size_binary(N)        the N bytes as they are
    string, large_string, string_view, binary, large_binary, binary_view
                                the bytes (UTF-8 for strings) with each 0x00 written 0x00 0xFF,
                                then the terminator 0x00 0x00 (so "a" < "a\\x00" < "ab")

Python values accepted by `encode_value`: what `.as_py()` returns for the type, plus the stored
integer for temporal types. Other objects (pandas or numpy scalars, aware times, timestamps finer
than the unit) are converted by pyarrow exactly as `pa.array([value], type)` stores them.
Known lossy case: `.as_py()` of time64[ns] drops nanoseconds, so such a value does not round-trip.
"""
from __future__ import annotations

import datetime as dt
import functools
import struct
from collections.abc import Callable, Sequence
from decimal import Decimal
from operator import index
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.types as pat

from filestore import keycodec_columns as cols
from filestore.errors import KeyCodecError

__all__ = ["KeyCodec", "KeyCodecError", "decode_value", "encode_value"]

NULL = b"\x00"
_Encoder = Callable[[Any], bytes]
_Decoder = Callable[[bytes, int], tuple[object, int]]  # (data, position after the marker) -> (value, end)
_ColumnEncoder = Callable[[pa.Array], pa.Array]

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_UTC = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_EPOCH_DATE = dt.date(1970, 1, 1)
_US_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 0}  # 0: finer than microseconds


# --- fixed-width integer layouts -----------------------------------------------------------------

_INT_FORMATS = {1: "B", 2: "H", 4: "I", 8: "Q"}


def _int_codec(width: int, signed: bool) -> tuple[_Encoder, _Decoder]:
    fmt = struct.Struct(">B" + _INT_FORMATS[width])
    payload = struct.Struct(">" + _INT_FORMATS[width])
    offset = 1 << (8 * width - 1) if signed else 0
    pack, unpack_from = fmt.pack, payload.unpack_from

    def encode(v: Any) -> bytes:
        return pack(1, index(v) + offset)

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        return unpack_from(data, pos)[0] - offset, pos + width

    return encode, decode


def _float_codec(width: int) -> tuple[_Encoder, _Decoder]:
    char = {2: "e", 4: "f", 8: "d"}[width]
    as_float, as_bits = struct.Struct(">" + char), struct.Struct(">" + _INT_FORMATS[width])
    marked = struct.Struct(">B" + _INT_FORMATS[width])
    sign, mask = 1 << (8 * width - 1), (1 << (8 * width)) - 1
    nan = b"\x01" + b"\xff" * width

    def encode(v: Any) -> bytes:
        if v != v:
            return nan
        bits = int.from_bytes(as_float.pack(v), "big")
        return marked.pack(1, bits ^ mask if bits & sign else bits | sign)

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        bits = as_bits.unpack_from(data, pos)[0]
        bits = bits ^ sign if bits & sign else bits ^ mask
        return float(as_float.unpack(as_bits.pack(bits))[0]), pos + width

    return encode, decode


# --- decimals ------------------------------------------------------------------------------------


def _decimal_codec(t: pa.DataType) -> tuple[_Encoder, _Decoder]:
    width, scale, limit = t.byte_width, t.scale, 10**t.precision
    offset = 1 << (8 * width - 1)

    def unscaled(v: Any) -> int:
        if isinstance(v, int) and not isinstance(v, bool):
            sign, digits, shift = v < 0, abs(v), scale
        elif isinstance(v, Decimal) and v.is_finite():
            parts = v.as_tuple()
            sign, digits = bool(parts.sign), int("".join(map(str, parts.digits)))
            shift = int(parts.exponent) + scale
        else:
            raise KeyCodecError(f"not a finite Decimal or int: {v!r}", t)
        if shift < 0:
            digits, rest = divmod(digits, 10**-shift)
            if rest:
                raise KeyCodecError(f"{v!r} has more than {scale} digits after the point", t)
        n = -digits * 10 ** max(shift, 0) if sign else digits * 10 ** max(shift, 0)
        if not -limit < n < limit:
            raise KeyCodecError(f"{v!r} does not fit the precision", t)
        return n

    def encode(v: Any) -> bytes:
        return b"\x01" + (unscaled(v) + offset).to_bytes(width, "big")

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        if len(data) < pos + width:
            raise KeyCodecError("truncated decimal", t)
        n = int.from_bytes(data[pos : pos + width], "big") - offset
        digits = tuple(int(c) for c in str(abs(n)))
        return Decimal((int(n < 0), digits, -scale)), pos + width

    return encode, decode


# --- temporal types: stored integers -------------------------------------------------------------


def _via_arrow(v: Any, t: pa.DataType, storage: pa.DataType) -> int:
    """The integer pyarrow stores for `v` in a column of type `t` (the slow, general path)."""
    try:
        return int(pa.array([v], t).view(storage)[0].as_py())
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise KeyCodecError(f"cannot convert {v!r}: {e}", t) from e


def _micros(td: dt.timedelta) -> int:
    return (td.days * 86_400 + td.seconds) * 1_000_000 + td.microseconds


def _in_unit(micros: int, unit: str) -> int:
    per = _US_PER_UNIT[unit]
    return micros * 1_000 if per == 0 else micros // per  # floor, as pyarrow converts


def _to_stored(t: pa.DataType, storage: pa.DataType) -> Callable[[Any], int]:
    """Python value -> the stored integer, exact std-lib types on a fast path."""
    unit = getattr(t, "unit", "ms")

    def convert(v: Any) -> int:
        kind = type(v)
        if kind is int:
            return v  # type: ignore[no-any-return]
        if kind is dt.datetime and pat.is_timestamp(t):
            return _in_unit(_micros(v - (_EPOCH if v.tzinfo is None else _EPOCH_UTC)), unit)
        if kind is dt.date and pat.is_date(t):
            days = (v - _EPOCH_DATE).days
            return days if pat.is_date32(t) else days * 86_400_000
        if kind is dt.time and v.tzinfo is None and pat.is_time(t):
            seconds = (v.hour * 60 + v.minute) * 60 + v.second
            return _in_unit(seconds * 1_000_000 + v.microsecond, unit)
        if kind is dt.timedelta and pat.is_duration(t):
            return _in_unit(_micros(v), unit)
        return _via_arrow(v, t, storage)

    return convert


def _temporal_codec(t: pa.DataType) -> tuple[_Encoder, _Decoder]:
    width = t.bit_width // 8
    storage = pa.int32() if width == 4 else pa.int64()
    int_encode, int_decode = _int_codec(width, signed=True)
    convert = _to_stored(t, storage)

    def encode(v: Any) -> bytes:
        return int_encode(convert(v))

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        n, end = int_decode(data, pos)
        return pa.array([n], storage).view(t)[0].as_py(), end

    return encode, decode


# --- byte strings --------------------------------------------------------------------------------


def _bytes_codec(t: pa.DataType, text: bool) -> tuple[_Encoder, _Decoder]:
    def escape(raw: bytes) -> bytes:
        return b"\x01" + (raw.replace(b"\x00", b"\x00\xff") if b"\x00" in raw else raw) + b"\x00\x00"

    def encode(v: Any) -> bytes:
        if text:
            if type(v) is not str:
                raise KeyCodecError(f"not a str: {v!r}", t)
            return escape(v.encode("utf-8"))
        if not isinstance(v, (bytes, bytearray, memoryview)):
            raise KeyCodecError(f"not bytes: {v!r}", t)
        return escape(bytes(v))

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        at = pos
        while True:
            at = data.find(b"\x00", at)
            follower = data[at + 1 : at + 2] if at >= 0 else b""
            if follower == b"\x00":
                break
            if follower != b"\xff":
                raise KeyCodecError("unterminated or badly escaped bytes", t)
            at += 2
        raw = data[pos:at].replace(b"\x00\xff", b"\x00")
        try:
            return (raw.decode("utf-8") if text else raw), at + 2
        except UnicodeDecodeError as e:
            raise KeyCodecError(f"invalid UTF-8: {e}", t) from e

    return encode, decode


def _fixed_bytes_codec(t: pa.DataType) -> tuple[_Encoder, _Decoder]:
    width = t.byte_width

    def encode(v: Any) -> bytes:
        if not isinstance(v, (bytes, bytearray, memoryview)) or len(v) != width:
            raise KeyCodecError(f"not {width} bytes: {v!r}", t)
        return b"\x01" + bytes(v)

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        if len(data) < pos + width:
            raise KeyCodecError("truncated fixed-size binary", t)
        return data[pos : pos + width], pos + width

    return encode, decode


def _bool_codec() -> tuple[_Encoder, _Decoder]:
    def encode(v: Any) -> bytes:
        if isinstance(v, (bool, np.bool_)):
            return b"\x01\x01" if v else b"\x01\x00"
        raise KeyCodecError(f"not a bool: {v!r}", pa.bool_())

    def decode(data: bytes, pos: int) -> tuple[object, int]:
        byte = data[pos : pos + 1]
        if byte not in (b"\x00", b"\x01"):
            raise KeyCodecError("bad bool byte", pa.bool_())
        return byte == b"\x01", pos + 1

    return encode, decode


# --- dispatch ------------------------------------------------------------------------------------


def _field(t: pa.DataType) -> tuple[_Encoder, _Decoder, _ColumnEncoder]:
    """Encoder, decoder and column encoder of one type; KeyCodecError if the type has no order."""
    if pat.is_boolean(t):
        return (*_bool_codec(), cols.bool_field)
    if pat.is_integer(t):
        width = t.bit_width // 8
        if pat.is_signed_integer(t):
            return (*_int_codec(width, True), lambda a: cols.signed_int_field(a, width))
        return (*_int_codec(width, False), lambda a: cols.unsigned_int_field(a, width))
    if pat.is_floating(t):
        width = t.bit_width // 8
        return (*_float_codec(width), lambda a: cols.float_field(a, width))
    if pat.is_decimal(t):
        return (*_decimal_codec(t), lambda a: cols.decimal_field(a, t.byte_width))
    if pat.is_date(t) or pat.is_timestamp(t) or pat.is_time(t) or pat.is_duration(t):
        width = t.bit_width // 8
        return (*_temporal_codec(t), lambda a: cols.signed_int_field(a, width))
    if pat.is_fixed_size_binary(t):
        return (*_fixed_bytes_codec(t), lambda a: cols.fixed_binary_field(a, t.byte_width))
    if pat.is_string(t) or pat.is_large_string(t) or pat.is_string_view(t):
        return (*_bytes_codec(t, text=True), cols.variable_binary_field)
    if pat.is_binary(t) or pat.is_large_binary(t) or pat.is_binary_view(t):
        return (*_bytes_codec(t, text=False), cols.variable_binary_field)
    raise KeyCodecError("no order-preserving key encoding for this type", t)


_CONVERSION_ERRORS = (struct.error, TypeError, ValueError, OverflowError)


class KeyCodec:
    """Encodes and decodes composite keys of fixed field types; immutable and picklable."""

    __slots__ = ("types", "_encoders", "_decoders", "_columns")
    types: tuple[pa.DataType, ...]
    _encoders: tuple[_Encoder, ...]
    _decoders: tuple[_Decoder, ...]
    _columns: tuple[_ColumnEncoder, ...]

    def __init__(self, types: Sequence[pa.DataType]) -> None:
        fields = [_field(t) for t in types]
        if not fields:
            raise KeyCodecError("a key needs at least one field")
        setattr_ = object.__setattr__
        setattr_(self, "types", tuple(types))
        setattr_(self, "_encoders", tuple(f[0] for f in fields))
        setattr_(self, "_decoders", tuple(f[1] for f in fields))
        setattr_(self, "_columns", tuple(f[2] for f in fields))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("KeyCodec is immutable")

    def __reduce__(self) -> tuple[type[KeyCodec], tuple[tuple[pa.DataType, ...]]]:
        return (KeyCodec, (self.types,))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KeyCodec) and self.types == other.types

    def __hash__(self) -> int:
        return hash(tuple(str(t) for t in self.types))

    def __repr__(self) -> str:
        return f"KeyCodec([{', '.join(map(str, self.types))}])"

    def encode(self, values: Sequence[object]) -> bytes:
        """The key of one tuple of values (None for null); the per-event hot path."""
        try:
            return b"".join([NULL if v is None else f(v) for f, v in zip(self._encoders, values, strict=True)])
        except _CONVERSION_ERRORS as e:
            raise KeyCodecError(f"cannot encode {tuple(values)!r}: {e}") from e

    def decode(self, data: bytes) -> tuple[object, ...]:
        """The values of one key; KeyCodecError if `data` is not exactly one key of these types."""
        data, pos = bytes(data), 0
        out: list[object] = []
        try:
            for t, decode in zip(self.types, self._decoders):
                marker, pos = data[pos : pos + 1], pos + 1
                if marker == NULL:
                    out.append(None)
                elif marker == b"\x01":
                    value, pos = decode(data, pos)
                    out.append(value)
                else:
                    raise KeyCodecError(f"bad marker byte {marker!r} at {pos - 1}", t)
        except (struct.error, IndexError, ValueError) as e:
            raise KeyCodecError(f"truncated or corrupt key {data!r}: {e}") from e
        if pos != len(data):
            raise KeyCodecError(f"{len(data) - pos} trailing bytes after the key {data!r}")
        return tuple(out)

    def encode_columns(self, columns: Sequence[pa.Array | pa.ChunkedArray]) -> pa.BinaryArray:
        """Vectorised `encode`: row i is `self.encode([c[i].as_py() for c in columns])`."""
        if len(columns) != len(self.types):
            raise KeyCodecError(f"{len(columns)} columns for a key of {len(self.types)} fields")
        if len({len(c) for c in columns}) != 1:
            raise KeyCodecError(f"columns of different lengths: {[len(c) for c in columns]}")
        fields = []
        for column, t, encode_column in zip(columns, self.types, self._columns):
            if pat.is_dictionary(column.type):
                column = column.cast(column.type.value_type)
            if column.type != t:
                raise KeyCodecError(f"column of type {column.type} for a key field", t)
            array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            fields.append(encode_column(array))
        try:
            return cols.join_fields(fields)
        except pa.ArrowInvalid as e:  # more than 2 GiB of keys in one array
            raise KeyCodecError(f"keys too large for one binary array: {e}") from e


@functools.lru_cache(maxsize=256)
def _single(type: pa.DataType) -> KeyCodec:
    return KeyCodec([type])


def encode_value(value: object, type: pa.DataType) -> bytes:
    """The key bytes of one field value (None allowed) of an Arrow type."""
    return _single(type).encode([value])


def decode_value(data: bytes, type: pa.DataType) -> object:
    """The value of one encoded field, as `.as_py()` gives it."""
    return _single(type).decode(data)[0]
