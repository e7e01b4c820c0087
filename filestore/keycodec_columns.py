"""Vectorised column encoders behind `filestore.keycodec.KeyCodec.encode_columns`.

The byte layout is documented (and owned) by `filestore.keycodec`; this module only produces
the same bytes for whole Arrow arrays with numpy and pyarrow.compute, never a per-row Python loop.

Every function here takes one non-chunked array of an already validated type and returns a
`pa.BinaryArray` of the same length whose row i is the full field encoding (marker byte plus
payload) of a non-null row, and null where the row is null. `join_fields` concatenates the
fields of a composite key and turns each null field into the single null marker byte 0x00.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

NULL_MARKER = b"\x00"
VALUE_MARKER = b"\x01"
ESCAPED_ZERO = b"\x00\xff"
TERMINATOR = b"\x00\x00"


def _validity(arr: pa.Array) -> pa.Buffer | None:
    """A validity bitmap starting at row 0 (the array's own may start at a bit offset)."""
    if arr.null_count == 0:
        return None
    if arr.offset == 0:
        return arr.buffers()[0]
    return pc.is_valid(arr).buffers()[1]


def _values(arr: pa.Array, dtype: str, width: int) -> np.ndarray:
    """The fixed-width value buffer of `arr` as a numpy array (garbage in null slots)."""
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * width)


def _with_marker(payload: np.ndarray, validity: pa.Buffer | None) -> pa.Array:
    """Rows = 0x01 + payload row (an (n, width) uint8 matrix), null where `validity` says so."""
    n, width = payload.shape
    matrix = np.empty((n, width + 1), dtype=np.uint8)
    matrix[:, 0] = 1
    matrix[:, 1:] = payload
    if n * (width + 1) < 2**31:  # a binary array over the same bytes: offsets every width + 1 bytes, no copy
        offsets = np.arange(0, (n + 1) * (width + 1), width + 1, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(matrix)])
    fixed = pa.Array.from_buffers(pa.binary(width + 1), n, [validity, pa.py_buffer(matrix)])
    return fixed.cast(pa.binary())


def _big_endian(values: np.ndarray, width: int) -> np.ndarray:
    return values.astype(f">u{width}").view(np.uint8).reshape(len(values), width)


def signed_int_field(arr: pa.Array, width: int) -> pa.Array:
    """int8..int64 and the temporal types stored as int32/int64: flip the sign bit."""
    unsigned = _values(arr, f"<i{width}", width).view(f"<u{width}")
    flipped = unsigned ^ np.array(1 << (8 * width - 1), dtype=f"<u{width}")
    return _with_marker(_big_endian(flipped, width), _validity(arr))


_SIGNED = {8: pa.int8(), 16: pa.int16(), 32: pa.int32(), 64: pa.int64()}


def stored_as_signed_int(t: pa.DataType) -> bool:
    """Whether the codec stores a field of type `t` with `signed_int_field` (filestore.keycodec): signed integers
    and the temporal types."""
    return bool(pa.types.is_signed_integer(t) or pa.types.is_date(t) or pa.types.is_time(t)
                or pa.types.is_timestamp(t) or pa.types.is_duration(t))


def signed_int_values(arr: pa.Array) -> np.ndarray:
    """The values of a null-free array of a `stored_as_signed_int` type as numpy signed integers, without a copy."""
    return arr.view(_SIGNED[arr.type.bit_width]).to_numpy()


def unsigned_int_field(arr: pa.Array, width: int) -> pa.Array:
    return _with_marker(_big_endian(_values(arr, f"<u{width}", width), width), _validity(arr))


def bool_field(arr: pa.Array) -> pa.Array:
    as_bytes = pc.cast(arr, pa.uint8())
    return _with_marker(_values(as_bytes, "<u1", 1).reshape(len(arr), 1), _validity(arr))


def float_field(arr: pa.Array, width: int) -> pa.Array:
    """Positive: set the sign bit; negative: invert all bits; every NaN: all 0xFF."""
    floats = _values(arr, f"<f{width}", width)
    bits = floats.view(f"<u{width}")
    sign = np.array(1 << (8 * width - 1), dtype=bits.dtype)
    out = np.where((bits & sign) != 0, ~bits, bits | sign)
    out[np.isnan(floats)] = np.iinfo(bits.dtype).max
    return _with_marker(_big_endian(out, width), _validity(arr))


def decimal_field(arr: pa.Array, width: int) -> pa.Array:
    """Little-endian two's complement unscaled integers -> big-endian with the sign bit flipped."""
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=len(arr) * width, offset=arr.offset * width)
    payload = raw.reshape(len(arr), width)[:, ::-1].copy()
    payload[:, 0] ^= 0x80
    return _with_marker(payload, _validity(arr))


def fixed_binary_field(arr: pa.Array, width: int) -> pa.Array:
    raw = np.frombuffer(arr.buffers()[1], dtype=np.uint8, count=len(arr) * width, offset=arr.offset * width)
    return _with_marker(raw.reshape(len(arr), width), _validity(arr))


def variable_binary_field(arr: pa.Array) -> pa.Array:
    """string/binary of any offset width or view layout: escape 0x00, then marker + bytes + terminator."""
    data = arr.cast(pa.binary()) if arr.type != pa.binary() else arr
    escaped = pc.replace_substring(data, pattern=b"\x00", replacement=ESCAPED_ZERO)
    return pc.binary_join_element_wise(VALUE_MARKER, escaped, TERMINATOR, b"")


def join_fields(fields: Sequence[pa.Array]) -> pa.BinaryArray:
    """Concatenate per-field encodings row by row; a null field becomes the null marker."""
    if len(fields) == 1 and fields[0].null_count == 0 and fields[0].type == pa.binary():
        return fields[0]  # one field without nulls: already the key
    joined = pc.binary_join_element_wise(
        *fields, b"", null_handling="replace", null_replacement=NULL_MARKER.decode("ascii")
    )
    return joined
