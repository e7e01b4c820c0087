"""Arrow columns <-> JSON values, both ways, vectorised with pyarrow.compute.

Encoding turns each Arrow column into an array of JSON *fragments* (the literal text of each value), so
objects are assembled with one string join per batch and no per-row Python.

On the wire (never change without a new format name):
- bool -> true/false; integers -> numbers; floats -> numbers, non-finite as the strings "NaN",
  "Infinity", "-Infinity"; decimals -> exact JSON numbers (as Flink's JSON format writes them).
- string -> JSON string; binary -> base64 string (Kafka Connect's JsonConverter convention).
- list -> JSON array of its items, each as above (PostgreSQL's arrays).
- date -> "yyyy-MM-dd"; timestamp -> "yyyy-MM-dd HH:mm:ss[.fff...]" (``SQL``, Flink's default) or with a
  ``T`` (``ISO-8601``), the fraction having the column's precision; timestamps with a time zone are written
  in UTC with a trailing ``Z``.

Decoding is lenient, to read real Debezium output: timestamps may be either standard, with or without
offset, or integers in the column's own unit (Debezium's Timestamp / MicroTimestamp / NanoTimestamp);
dates may be "yyyy-MM-dd" or days since the epoch (io.debezium.time.Date); decimals may be numbers,
numeric strings or Debezium's base64 two's-complement "precise" bytes; floats may be "NaN"/"Infinity".
"""
from __future__ import annotations

import base64
import binascii
import datetime as dt
import decimal
import json
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc

from logstore.errors import LogFormatError

TimestampStandard = Literal["SQL", "ISO-8601"]

_ARROW_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError,
                 OverflowError, decimal.InvalidOperation, binascii.Error)
_CONTROL_ESCAPES = {0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"}
_EPOCH_DAY = dt.date(1970, 1, 1)
_OFFSET_RE = r"(Z|[+-]\d\d(:?\d\d)?)$"


class ColumnError(Exception):
    """Values at these positions cannot become the column's type."""

    def __init__(self, positions: list[int], reason: str) -> None:
        super().__init__(reason)
        self.positions = positions
        self.reason = reason


def is_supported(dtype: pa.DataType) -> bool:
    """The column types the log formats carry: scalars, and lists of them (PostgreSQL's arrays)."""
    t = pa.types
    if t.is_list(dtype):
        return not t.is_list(dtype.value_type) and is_supported(dtype.value_type)
    return bool(
        t.is_boolean(dtype) or t.is_signed_integer(dtype)
        or (t.is_unsigned_integer(dtype) and dtype.bit_width <= 32)
        or t.is_float32(dtype) or t.is_float64(dtype) or t.is_decimal(dtype)
        or t.is_string(dtype) or t.is_large_string(dtype) or t.is_binary(dtype) or t.is_large_binary(dtype)
        or t.is_date32(dtype) or t.is_timestamp(dtype)
    )


def check_schema(schema: pa.Schema) -> None:
    """Raise LogFormatError naming every column whose type no log format carries."""
    bad = [f"{f.name} ({f.type})" for f in schema if not is_supported(f.type)]
    if bad:
        raise LogFormatError(f"column types not supported by the log formats: {', '.join(bad)}")


# ------------------------------------------------------------------------------------------------ encoding


def json_fragments(arr: pa.Array, standard: TimestampStandard = "SQL") -> pa.Array:
    """The JSON text of every value of `arr` (nulls as ``null``), as a string array without nulls."""
    dtype = arr.type
    t = pa.types
    if t.is_boolean(dtype):
        out = pc.if_else(arr, "true", "false")
    elif t.is_integer(dtype) or t.is_decimal(dtype):
        out = pc.cast(arr, pa.string())
    elif t.is_floating(dtype):
        out = pc.cast(arr, pa.string())
        if pc.any(pc.invert(pc.is_finite(arr))).as_py():
            out = pc.if_else(pc.is_nan(arr), '"NaN"', out)
            out = pc.if_else(pc.and_(pc.is_inf(arr), pc.greater(arr, 0)), '"Infinity"', out)
            out = pc.if_else(pc.and_(pc.is_inf(arr), pc.less(arr, 0)), '"-Infinity"', out)
    elif t.is_string(dtype) or t.is_large_string(dtype):
        out = _quote(_escape(pc.cast(arr, pa.string())))
    elif t.is_binary(dtype) or t.is_large_binary(dtype):
        encoded = [None if v is None else binascii.b2a_base64(v, newline=False).decode() for v in arr.to_pylist()]
        out = _quote(pa.array(encoded, pa.string()))
    elif t.is_date32(dtype):
        out = _quote(pc.cast(arr, pa.string()))
    elif t.is_timestamp(dtype):
        naive = pc.cast(arr, pa.timestamp(dtype.unit)) if dtype.tz is not None else arr
        text = pc.cast(naive, pa.string())  # "yyyy-MM-dd HH:mm:ss[.fff]" (UTC wall clock); much faster than strftime
        if standard != "SQL":
            text = pc.replace_substring(text, " ", "T", max_replacements=1)
        out = _quote(pc.binary_join_element_wise(text, "Z", "") if dtype.tz is not None else text)
    elif t.is_list(dtype):   # each list's items as fragments, joined per list: JSON arrays, no row loop
        arr = arr.combine_chunks() if isinstance(arr, pa.ChunkedArray) else arr
        start, end = (arr.offsets[0].as_py(), arr.offsets[-1].as_py()) if len(arr) else (0, 0)
        items = json_fragments(arr.values.slice(start, end - start), standard)   # a slice's own items
        offsets = pc.subtract(arr.offsets, pa.scalar(start, arr.offsets.type))
        joined = pc.binary_join(pa.ListArray.from_arrays(offsets, items, mask=arr.is_null()), ",")
        out = pc.binary_join_element_wise("[", joined, "]", "")
    else:
        raise LogFormatError(f"cannot encode a column of type {dtype} as JSON")
    return pc.fill_null(out, "null")


def json_objects(columns: list[tuple[str, pa.Array]], standard: TimestampStandard = "SQL") -> pa.Array:
    """One JSON object per row holding the given columns, as a string array (one string join, no row loop)."""
    if not columns:
        raise LogFormatError("cannot encode an object without columns")
    parts: list[Any] = []
    for i, (name, arr) in enumerate(columns):
        parts.append(("{" if i == 0 else ",") + json.dumps(name) + ":")
        parts.append(json_fragments(arr, standard))
    parts.append("}")
    return pc.binary_join_element_wise(*parts, "")


def to_bytes_list(text: pa.Array) -> list[bytes]:
    """Message values from a string array (UTF-8 bytes, no re-encoding in Python)."""
    return pc.cast(text, pa.binary()).to_pylist()  # type: ignore[no-any-return]


def _escape(arr: pa.Array) -> pa.Array:
    out = pc.replace_substring(arr, "\\", "\\\\")
    out = pc.replace_substring(out, '"', '\\"')
    if pc.any(pc.match_substring_regex(out, "[\\x00-\\x1f]")).as_py():
        for code in range(32):
            out = pc.replace_substring(out, chr(code), _CONTROL_ESCAPES.get(code, f"\\u{code:04x}"))
    return out


def _quote(arr: pa.Array) -> pa.Array:
    return pc.binary_join_element_wise('"', arr, '"', "")


# ------------------------------------------------------------------------------------------------ decoding


def column_from_values(values: list[Any], dtype: pa.DataType) -> pa.Array:
    """An Arrow array of `dtype` from decoded values (JSON scalars or Avro-native Python values).

    Raises ColumnError naming the positions that cannot be converted.
    """
    binary = pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype)
    if pa.types.is_floating(dtype):  # exact-decimal JSON parsing gives Decimal; casting decimal->float rounds badly
        values = [float(v) if isinstance(v, decimal.Decimal) else v for v in values]
    if not binary:  # a JSON string for a binary column is base64, never the raw bytes
        try:
            return pa.array(values).cast(dtype, safe=True)
        except _ARROW_ERRORS:
            pass
    if pa.types.is_timestamp(dtype) and all(v is None or isinstance(v, str) for v in values):
        arr = _timestamps_from_strings(pa.array(values, pa.string()), dtype)
        if arr is not None:
            return arr
    converted: list[Any] = []
    bad: list[int] = []
    reason = ""
    for i, v in enumerate(values):
        try:
            one = _coerce(v, dtype)
            pa.array([one]).cast(dtype, safe=True)
            converted.append(one)
        except _ARROW_ERRORS as exc:
            bad.append(i)
            converted.append(None)
            reason = reason or f"value {v!r} is not a valid {dtype}: {exc}"
    if bad:
        raise ColumnError(bad, reason)
    return pa.array(converted).cast(dtype, safe=True)


def _timestamps_from_strings(text: pa.Array, dtype: pa.TimestampType) -> pa.Array | None:
    try:
        if dtype.tz is None:
            return pc.cast(pc.replace_substring_regex(text, r"(Z|[+-]00:?00)$", ""), dtype)
        has_offset = pc.match_substring_regex(text, _OFFSET_RE)
        text = pc.if_else(has_offset, text, pc.binary_join_element_wise(text, "Z", ""))
        return pc.cast(pc.cast(text, pa.timestamp(dtype.unit, "UTC")), dtype)
    except _ARROW_ERRORS:
        return None


def _coerce(v: Any, dtype: pa.DataType) -> Any:
    """One decoded value as a Python value pyarrow converts to `dtype` (slow path, odd inputs only)."""
    t = pa.types
    if v is None:
        return None
    if isinstance(v, (dict, list)):
        raise TypeError(f"a JSON {type(v).__name__} is not a scalar")
    if t.is_boolean(dtype):
        if not isinstance(v, bool):
            raise TypeError("not a boolean")
        return v
    if t.is_integer(dtype):
        if isinstance(v, bool) or (isinstance(v, float) and not v.is_integer()):
            raise TypeError("not an integer")
        return int(v)
    if t.is_floating(dtype):
        if isinstance(v, bool):
            raise TypeError("not a number")
        return {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.get(v, v) \
            if isinstance(v, str) else float(v)
    if t.is_decimal(dtype):
        return _decimal(v, dtype)
    if t.is_binary(dtype) or t.is_large_binary(dtype):
        return base64.b64decode(v, validate=True) if isinstance(v, str) else bytes(v)
    if t.is_date32(dtype):
        if isinstance(v, str):
            return dt.date.fromisoformat(v)
        if isinstance(v, int) and not isinstance(v, bool):
            return _EPOCH_DAY + dt.timedelta(days=v)
        return v
    if t.is_timestamp(dtype):
        return _timestamp(v, dtype)
    return v


def _decimal(v: Any, dtype: pa.DataType) -> decimal.Decimal:
    if isinstance(v, bool):
        raise TypeError("not a decimal")
    if isinstance(v, float):
        return decimal.Decimal(repr(v))
    if isinstance(v, str):
        try:
            return decimal.Decimal(v)
        except decimal.InvalidOperation:
            unscaled = int.from_bytes(base64.b64decode(v, validate=True), "big", signed=True)
            return decimal.Decimal(unscaled).scaleb(-dtype.scale)
    return decimal.Decimal(v)


def _timestamp(v: Any, dtype: pa.TimestampType) -> Any:
    if isinstance(v, bool):
        raise TypeError("not a timestamp")
    if isinstance(v, int):
        return v
    if isinstance(v, str):
        v = dt.datetime.fromisoformat(v)
    if not isinstance(v, dt.datetime):
        raise TypeError("not a timestamp")
    if dtype.tz is None and v.tzinfo is not None:
        return v.astimezone(dt.timezone.utc).replace(tzinfo=None)
    if dtype.tz is not None and v.tzinfo is None:
        return v.replace(tzinfo=dt.timezone.utc)
    return v
