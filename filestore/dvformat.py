"""The deletion-vector codec: one byte encoding of "which rows of a data file are deleted" shared by Delta Lake,
Iceberg v3 and our own reader.

The core is the 64-bit RoaringBitmap *portable* serialization (CRoaring's roaring64 portable format, Delta's
`RoaringBitmapArray` portable format): int64 LE count of 32-bit buckets, then per bucket (ascending) a uint32 LE
key (the high 32 bits of its positions) and a 32-bit portable roaring bitmap of the low 32 bits. `pyroaring`'s
`BitMap64.serialize` writes exactly that format. Around it:

- Delta's serialized DV (`encode_positions`): magic 1681511377 as int32 LE (bytes D1 D3 39 64), then the bitmap.
- Delta's DV file (`encode_dv_file`): version byte 1, then per DV `size` (int32 BE), the serialized DV, CRC-32 of
  the serialized DV (int32 BE). A DV's `offset` is where its size field starts (the first one is at 1) and its
  `sizeInBytes` the length of the serialized DV alone (Delta's `DeletionVectorStore.readRangeFromStream`).
- Iceberg's `deletion-vector-v1` Puffin blob (`iceberg_dv_blob`): byte for byte one framed DV of a Delta DV file
  (length BE, magic, bitmap, CRC-32 BE over magic + bitmap), so one encoder serves both.

Positions are numpy uint64 arrays in and out (no per-row Python loop); positions must be < 2**63 (Delta and
Iceberg both require bucket keys with the top bit 0).
"""
from __future__ import annotations

import array
import json
import struct
import uuid as uuid_module
import zlib
from collections.abc import Sequence

import numpy as np
from pyroaring import BitMap64

from filestore.errors import FileStoreError

DELTA_DV_MAGIC = 1681511377
_MAGIC = struct.pack("<i", DELTA_DV_MAGIC)  # b"\xd1\xd3\x39\x64": Iceberg's deletion-vector-v1 magic too
DV_FILE_VERSION = 1
PUFFIN_MAGIC = b"PFA1"
ICEBERG_DV_BLOB_TYPE = "deletion-vector-v1"
_MAX_POSITION = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1

# ZeroMQ Z85 (https://rfc.zeromq.org/spec/32/), the Base85 variant of Delta's Base85Codec
_Z85_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_ENCODE = np.frombuffer(_Z85_ALPHABET, dtype=np.uint8)
_Z85_DECODE = np.full(256, -1, dtype=np.int64)
_Z85_DECODE[_Z85_ENCODE] = np.arange(85)
_Z85_POWERS = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)


class DeletionVectorError(FileStoreError):
    """Bytes that are not a deletion vector (wrong magic, truncated, size or CRC mismatch), or positions / arguments
    that cannot be encoded as one; the message (one line) names what is wrong."""

    def __init__(self, message: str) -> None:
        super().__init__(message)


def _as_positions(positions: np.ndarray) -> np.ndarray:
    """`positions` as a 1-d uint64 array, checked to be valid row positions (0 <= p < 2**63)."""
    arr = np.asarray(positions)
    if arr.ndim != 1:
        raise DeletionVectorError(f"deletion vector positions must be a 1-d array, got shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.uint64)
    if arr.dtype.kind == "i":
        if int(arr.min()) < 0:
            raise DeletionVectorError(f"deletion vector position {int(arr.min())} is negative")
    elif arr.dtype.kind != "u":
        raise DeletionVectorError(f"deletion vector positions must be integers, got dtype {arr.dtype}")
    arr = arr.astype(np.uint64, copy=False)
    if int(arr.max()) > _MAX_POSITION:
        raise DeletionVectorError(f"deletion vector position {int(arr.max())} is >= 2**63")
    return arr


def _serialize_bitmap(positions: np.ndarray) -> bytes:
    """The portable 64-bit roaring serialization of the positions (duplicates collapse, order is irrelevant)."""
    values = array.array("Q")
    # sorted first: BitMap64 inserts unsorted positions many times slower (np.sort beats np.unique too)
    values.frombytes(np.sort(_as_positions(positions)).data.cast("B"))
    bitmap = BitMap64(values)  # from array.array('Q'): pyroaring's bulk C path
    bitmap.run_optimize()  # dense runs become run containers
    return bytes(bitmap.serialize())


def union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The sorted unique positions in `a` or `b` (a roaring union: many times faster than numpy's sort-based
    union1d on large vectors)."""
    bitmaps = []
    for positions in (a, b):
        values = array.array("Q")
        values.frombytes(np.sort(_as_positions(positions)).data.cast("B"))
        bitmaps.append(BitMap64(values))
    return np.frombuffer((bitmaps[0] | bitmaps[1]).to_array(), dtype=np.uint64)


def encode_positions(positions: np.ndarray) -> bytes:
    """Delta's serialized deletion vector: magic 1681511377 (int32 LE) + portable 64-bit roaring bitmap."""
    return _MAGIC + _serialize_bitmap(positions)


def decode_positions(data: bytes) -> np.ndarray:
    """The sorted uint64 positions of a serialized deletion vector (`encode_positions`' output or Delta's).

    Only Delta's portable format (magic 1681511377) is accepted, not its legacy "native" one (1681511376). Bytes
    after a complete bitmap go unnoticed (pyroaring ignores them); `read_dv` pins the length by size and CRC."""
    data = bytes(data)
    if len(data) < 12:
        raise DeletionVectorError(f"deletion vector truncated: {len(data)} bytes, at least 12 expected")
    if data[:4] != _MAGIC:
        magic = struct.unpack("<i", data[:4])[0]
        raise DeletionVectorError(f"deletion vector has magic number {magic}, expected {DELTA_DV_MAGIC}")
    try:
        bitmap = BitMap64.deserialize(data[4:])
    except (ValueError, IndexError) as error:
        raise DeletionVectorError(f"deletion vector bitmap is truncated or corrupt ({len(data)} bytes): "
                                  f"{error}") from None
    return np.frombuffer(bitmap.to_array(), dtype=np.uint64)


def _frame(vector: bytes) -> bytes:
    """size (int32 BE) + vector + CRC-32 of vector (BE): one DV in a Delta DV file, and an Iceberg DV blob."""
    if len(vector) > _INT32_MAX:
        raise DeletionVectorError(f"deletion vector of {len(vector)} bytes exceeds the 2**31-1 byte limit")
    return struct.pack(">i", len(vector)) + vector + struct.pack(">I", zlib.crc32(vector))


def encode_dv_file(vectors: Sequence[bytes]) -> tuple[bytes, list[tuple[int, int]]]:
    """Delta's deletion-vector file holding `vectors` (each `encode_positions`' output), and per vector its
    (offset, size) as Delta's descriptor wants them: offset of its size field in the file, size of the vector."""
    parts = [bytes([DV_FILE_VERSION])]
    ranges: list[tuple[int, int]] = []
    offset = 1
    for index, vector in enumerate(vectors):
        vector = bytes(vector)
        if vector[:4] != _MAGIC:
            raise DeletionVectorError(f"vector {index} given to encode_dv_file is not a serialized deletion vector "
                                      "(no magic number)")
        parts.append(_frame(vector))
        ranges.append((offset, len(vector)))
        offset += len(vector) + 8
    return b"".join(parts), ranges


def read_dv(file_bytes_or_range: bytes, offset: int, size: int) -> np.ndarray:
    """The positions of the DV at (`offset`, `size`) of a Delta DV file, its size field and CRC checked.

    `file_bytes_or_range` is either the whole file, or just the `size + 8` bytes from `offset` (a ranged read;
    also an Iceberg deletion-vector-v1 blob). The two cannot be confused: a whole file is at least 9 bytes longer
    than `size` (its version byte)."""
    data = memoryview(bytes(file_bytes_or_range))
    if len(data) != size + 8:
        if len(data) < 1 or data[0] != DV_FILE_VERSION:
            version = data[0] if len(data) else None
            raise DeletionVectorError(f"deletion vector file has version {version}, expected {DV_FILE_VERSION}")
        if offset < 1 or offset + size + 8 > len(data):
            raise DeletionVectorError(f"deletion vector at offset {offset} size {size} lies outside the "
                                      f"{len(data)}-byte file")
        data = data[offset:offset + size + 8]
    stored_size = struct.unpack(">i", data[:4])[0]
    if stored_size != size:
        raise DeletionVectorError(f"deletion vector size field is {stored_size}, descriptor says {size}")
    vector = bytes(data[4:4 + size])
    stored_crc = struct.unpack(">I", data[4 + size:])[0]
    if stored_crc != zlib.crc32(vector):
        raise DeletionVectorError(f"deletion vector CRC-32 mismatch: stored {stored_crc:#010x}, "
                                  f"computed {zlib.crc32(vector):#010x}")
    return decode_positions(vector)


def z85_encode(data: bytes) -> str:
    """Z85 text of `data`; like Delta's Base85Codec.encodeBytes, unaligned input is zero-padded to 4 bytes."""
    data = bytes(data) + b"\0" * (-len(data) % 4)
    values = np.frombuffer(data, dtype=">u4").astype(np.uint64)
    digits = (values[:, None] // _Z85_POWERS[None, :]) % 85
    return _Z85_ENCODE[digits.astype(np.intp)].tobytes().decode("ascii")


def z85_decode(text: str, size: int | None = None) -> bytes:
    """The bytes of Z85 `text` (length a multiple of 5); `size` drops the encoder's zero padding."""
    raw = np.frombuffer(text.encode("ascii", errors="replace"), dtype=np.uint8)
    if len(raw) % 5:
        raise DeletionVectorError(f"Z85 text has length {len(raw)}, not a multiple of 5")
    digits = _Z85_DECODE[raw]
    if (digits < 0).any():
        bad = text[int(np.argmax(digits < 0))]
        raise DeletionVectorError(f"Z85 text holds {bad!r}, not a Z85 character")
    values = (digits.reshape(-1, 5).astype(np.uint64) * _Z85_POWERS[None, :]).sum(axis=1)
    if (values > 0xFFFFFFFF).any():
        raise DeletionVectorError("Z85 text holds a 5-character group above 2**32-1")
    out = values.astype(">u4").tobytes()
    if size is not None:
        if size > len(out) or size < len(out) - 3:
            raise DeletionVectorError(f"Z85 text decodes to {len(out)} bytes, cannot hold {size}")
        out = out[:size]
    return out


def dv_file_name(uuid: uuid_module.UUID) -> str:
    """The name of Delta's DV file for `uuid`: `deletion_vector_<uuid, canonical text>.bin`."""
    return f"deletion_vector_{uuid}.bin"


def delta_dv_descriptor(relative_dir: str, uuid: uuid_module.UUID, offset: int, size: int,
                        cardinality: int) -> dict[str, object]:
    """Delta's `deletionVector` object (storageType 'u') for a DV at (offset, size) of the file
    `<table root>/<relative_dir>/deletion_vector_<uuid>.bin` (`relative_dir` "" for the table root).

    pathOrInlineDv is `relative_dir` (Delta's "random prefix") followed by the 20-character Z85 of the UUID's 16
    bytes, most significant first (Java's `putLong(msb); putLong(lsb)` = Python's `UUID.bytes`)."""
    if relative_dir.startswith("/") or relative_dir.endswith("/"):
        raise DeletionVectorError(f"deletion vector directory {relative_dir!r} must be relative, without a "
                                  "leading or trailing '/'")
    if offset < 1 or size < 12 or cardinality < 0:
        raise DeletionVectorError(f"invalid deletion vector range/cardinality: offset {offset}, size {size}, "
                                  f"cardinality {cardinality}")
    return {"storageType": "u", "pathOrInlineDv": relative_dir + z85_encode(uuid.bytes), "offset": offset,
            "sizeInBytes": size, "cardinality": cardinality}


def iceberg_dv_blob(positions: np.ndarray) -> bytes:
    """Iceberg v3 `deletion-vector-v1` blob body: int32 BE length of (magic + vector), magic D1 D3 39 64, the
    portable 64-bit roaring bitmap, CRC-32 BE of (magic + vector). `read_dv(blob, 0, len(blob) - 8)` decodes it."""
    return _frame(encode_positions(positions))


def write_puffin(blobs: Sequence[tuple[bytes, dict[str, object]]],
                 created_by: str = "tablestore") -> tuple[bytes, list[tuple[int, int]]]:
    """A Puffin file of `deletion-vector-v1` blobs (each `iceberg_dv_blob`'s output with its properties, which
    must hold "referenced-data-file" and "cardinality"; values are written as strings), and per blob its
    (offset, length) in the file (Iceberg's content_offset / content_size_in_bytes)."""
    parts = [PUFFIN_MAGIC]
    offset = len(PUFFIN_MAGIC)
    metadata: list[dict[str, object]] = []
    ranges: list[tuple[int, int]] = []
    for index, (blob, properties) in enumerate(blobs):
        missing = [key for key in ("referenced-data-file", "cardinality") if key not in properties]
        if missing:
            raise DeletionVectorError(f"Puffin blob {index} lacks propert{'ies' if len(missing) > 1 else 'y'} "
                                      f"{', '.join(missing)}")
        blob = bytes(blob)
        parts.append(blob)
        ranges.append((offset, len(blob)))
        metadata.append({"type": ICEBERG_DV_BLOB_TYPE, "fields": [], "snapshot-id": -1, "sequence-number": -1,
                         "offset": offset, "length": len(blob),
                         "properties": {str(key): str(value) for key, value in properties.items()}})
        offset += len(blob)
    payload = json.dumps({"blobs": metadata, "properties": {"created-by": created_by}},
                         separators=(",", ":")).encode("utf-8")
    parts += [PUFFIN_MAGIC, payload, struct.pack("<i", len(payload)), b"\0\0\0\0", PUFFIN_MAGIC]
    return b"".join(parts), ranges
