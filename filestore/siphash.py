"""pandas' `hash_array` of bytes values, vectorised with numpy over an Arrow binary array (the bucket hash).

`hash_array(values, categorize=False)` on an object array of bytes is SipHash-2-4 of each value with the 128-bit key
b"0123456789123456" (two little-endian 64-bit words), followed by pandas' 64-bit mix (`h ^= h >> 30;
h *= 0xBF58476D1CE4E5B9; h ^= h >> 27; h *= 0x94D049BB133111EB; h ^= h >> 31`). pandas needs a Python bytes object
per value and a per-value loop holding the GIL; for values of one length (keys of fixed-width types) the same
arithmetic runs here on numpy uint64 arrays, a block of rows at a time: no Python object per row, and the GIL is
released, so slices of a large write hash on both cores.
The result is bit for bit pandas' (tests compare them on random values); `filestore.bucket` documents the contract.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
from pandas.util import hash_array

_U = np.uint64
_KEY = b"0123456789123456"  # pandas' default hash key
_K0 = int.from_bytes(_KEY[:8], "little")
_K1 = int.from_bytes(_KEY[8:], "little")
_INIT = (_K0 ^ 0x736F6D6570736575, _K1 ^ 0x646F72616E646F6D, _K0 ^ 0x6C7967656E657261, _K1 ^ 0x7465646279746573)
_BLOCK_BYTES = 1 << 18  # message bytes per block of rows: the working arrays stay in the CPU's cache


def _rotl(x: np.ndarray, bits: int, tmp: np.ndarray) -> None:
    np.left_shift(x, _U(bits), out=tmp)
    np.right_shift(x, _U(64 - bits), out=x)
    np.bitwise_or(x, tmp, out=x)


def _sip_round(v0: np.ndarray, v1: np.ndarray, v2: np.ndarray, v3: np.ndarray, tmp: np.ndarray) -> None:
    v0 += v1
    _rotl(v1, 13, tmp)
    v1 ^= v0
    _rotl(v0, 32, tmp)
    v2 += v3
    _rotl(v3, 16, tmp)
    v3 ^= v2
    v0 += v3
    _rotl(v3, 21, tmp)
    v3 ^= v0
    v2 += v1
    _rotl(v1, 17, tmp)
    v1 ^= v2
    _rotl(v2, 32, tmp)


def _siphash_words(words: np.ndarray) -> np.ndarray:
    """SipHash-2-4 of rows given as (rows, words) little-endian uint64 message words, the last one holding the tail
    bytes and the length byte."""
    rows = words.shape[0]
    v0, v1, v2, v3 = (np.full(rows, _U(v)) for v in _INIT)
    tmp = np.empty(rows, _U)
    for j in range(words.shape[1]):
        m = words[:, j]
        v3 ^= m
        _sip_round(v0, v1, v2, v3, tmp)
        _sip_round(v0, v1, v2, v3, tmp)
        v0 ^= m
    v2 ^= _U(0xFF)
    for _ in range(4):
        _sip_round(v0, v1, v2, v3, tmp)
    v0 ^= v1
    v2 ^= v3
    v0 ^= v2
    return v0


def _mix(h: np.ndarray) -> np.ndarray:
    h ^= h >> _U(30)
    h *= _U(0xBF58476D1CE4E5B9)
    h ^= h >> _U(27)
    h *= _U(0x94D049BB133111EB)
    h ^= h >> _U(31)
    return h


def _fixed_message(rows: np.ndarray, length: int) -> np.ndarray:
    """The message words of equal-length rows given as a (rows, length) byte matrix."""
    nwords = length // 8 + 1
    block = np.zeros((len(rows), nwords * 8), dtype=np.uint8)
    block[:, :length] = rows
    block[:, nwords * 8 - 1] = length & 0xFF
    return block.view("<u8").reshape(len(rows), nwords)


def hash_binary(values: pa.BinaryArray) -> np.ndarray:
    """uint64 hash of every value of a binary array without nulls: `pandas.util.hash_array` of the values as bytes
    with `categorize=False`. Values of one length (the keys of fixed-width types) are hashed here with numpy;
    others by pandas (its per-value loop beats gathering bytes of varying lengths into blocks)."""
    n = len(values)
    if n == 0:
        return np.empty(0, dtype=_U)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int32, count=n + 1, offset=values.offset * 4)
    length = int(offsets[1] - offsets[0])
    if length == 0 or int(offsets[-1] - offsets[0]) != n * length or not bool((np.diff(offsets) == length).all()):
        return hash_array(np.asarray(values.to_numpy(zero_copy_only=False), dtype=object), categorize=False)
    data = np.frombuffer(values.buffers()[2], dtype=np.uint8)
    matrix = data[int(offsets[0]) : int(offsets[0]) + n * length].reshape(n, length)
    out = np.empty(n, dtype=_U)
    step = max(1, _BLOCK_BYTES // (length + 8))
    for start in range(0, n, step):
        out[start : start + step] = _mix(_siphash_words(_fixed_message(matrix[start : start + step], length)))
    return out


def hash_signed_int_keys(values: np.ndarray) -> np.ndarray:
    """`hash_binary` of the key codec's bytes of the signed integers `values` (int8..int64, no nulls), computed
    from the values without building the bytes: the codec writes a key of one such field as the marker 0x01, then
    the value with its sign bit flipped, big-endian (`filestore.keycodec_columns.signed_int_field`); here those
    bytes are assembled into the SipHash message words with a few shifts per block of rows."""
    width = values.dtype.itemsize
    unsigned = values.view(f"<u{width}")
    sign = np.array(1 << (8 * width - 1), dtype=unsigned.dtype)
    length = _U((width + 1) << 56)  # the message length in the last word's top byte
    n = len(values)
    out = np.empty(n, dtype=_U)
    step = max(1, _BLOCK_BYTES // 16)
    for start in range(0, n, step):
        flipped = unsigned[start : start + step] ^ sign
        big_endian = flipped.byteswap().astype(_U)  # its big-endian bytes, read as a little-endian word
        first = (big_endian << _U(8)) | _U(1)  # marker, then the value's first (up to 7) bytes
        if width == 8:  # 9 bytes: the value's last byte and the length make the second word
            words = np.empty((len(flipped), 2), dtype=_U)
            words[:, 0] = first
            words[:, 1] = (flipped & _U(0xFF)) | length
        else:
            words = (first | length).reshape(-1, 1)
        out[start : start + step] = _mix(_siphash_words(words))  # per block: no temporary of the input's length
    return out
