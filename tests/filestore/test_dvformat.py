"""The deletion-vector codec (filestore/dvformat.py): round trips, a golden vector, corrupt input, Z85, and that
delta-rs (deltalake) and pyiceberg read what it writes.

deltalake 1.6.x reads deletion vectors through `DeltaTable.scan()` (delta-kernel); its `to_pyarrow_table()` still
refuses tables with the `deletionVectors` reader feature (DeltaProtocolError), so the end-to-end test uses scan().
"""
from __future__ import annotations

import json
import struct
import uuid
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filestore import dvformat
from filestore.dvformat import (
    DV_FILE_VERSION, DeletionVectorError, decode_positions, delta_dv_descriptor, dv_file_name, encode_dv_file,
    encode_positions, iceberg_dv_blob, read_dv, write_puffin, z85_decode, z85_encode,
)
from filestore.errors import FileStoreError

# positions spread over a few 2**32 buckets (0, 1, 2 and a far one), near bucket edges too
_position = st.one_of(
    st.integers(0, 300),
    st.integers((1 << 32) - 50, (1 << 32) + 50),
    st.integers(2 << 32, (2 << 32) + 100_000),
    st.integers((1 << 62), (1 << 62) + 10),
    st.integers(0, (1 << 63) - 1),
)
_positions = st.lists(_position, max_size=200)


@st.composite
def _with_runs(draw: st.DrawFn) -> list[int]:
    """Dense runs (run and bitmap containers) beside scattered positions."""
    positions = draw(_positions)
    for _ in range(draw(st.integers(0, 3))):
        start = draw(_position)
        positions.extend(range(start, min(start + draw(st.integers(1, 70_000)), 1 << 63)))
    return positions


def _expected(positions: list[int]) -> np.ndarray:
    return np.unique(np.array(positions, dtype=np.uint64))


@settings(max_examples=150, deadline=None)
@given(_with_runs())
def test_positions_round_trip(positions: list[int]) -> None:
    data = encode_positions(np.array(positions, dtype=np.uint64))
    decoded = decode_positions(data)
    assert decoded.dtype == np.uint64
    np.testing.assert_array_equal(decoded, _expected(positions))


@settings(max_examples=60, deadline=None)
@given(st.lists(_with_runs(), min_size=1, max_size=4))
def test_dv_file_round_trip(vectors: list[list[int]]) -> None:
    serialized = [encode_positions(np.array(v, dtype=np.uint64)) for v in vectors]
    data, ranges = encode_dv_file(serialized)
    assert data[0] == DV_FILE_VERSION
    assert ranges[0][0] == 1
    for (offset, size), vector, positions in zip(ranges, serialized, vectors):
        assert size == len(vector)
        assert data[offset:offset + 4] == struct.pack(">i", size)   # offset = where the size field starts
        np.testing.assert_array_equal(read_dv(data, offset, size), _expected(positions))
        # a ranged read: just the size + 8 bytes from offset
        np.testing.assert_array_equal(read_dv(data[offset:offset + size + 8], offset, size), _expected(positions))
    last_offset, last_size = ranges[-1]
    assert len(data) == last_offset + last_size + 8


@settings(max_examples=60, deadline=None)
@given(_positions)
def test_iceberg_blob_is_a_framed_delta_vector(positions: list[int]) -> None:
    blob = iceberg_dv_blob(np.array(positions, dtype=np.uint64))
    length = struct.unpack(">i", blob[:4])[0]
    assert length == len(blob) - 8
    assert blob[4:8] == bytes([0xD1, 0xD3, 0x39, 0x64])
    assert struct.unpack(">I", blob[-4:])[0] == zlib.crc32(blob[4:-4])   # over magic + vector
    np.testing.assert_array_equal(read_dv(blob, 0, length), _expected(positions))


def test_empty_set() -> None:
    data = encode_positions(np.array([], dtype=np.uint64))
    assert data == struct.pack("<i", 1681511377) + b"\0" * 8   # magic, zero buckets
    decoded = decode_positions(data)
    assert decoded.dtype == np.uint64 and decoded.size == 0


def test_int64_input_and_duplicates() -> None:
    np.testing.assert_array_equal(decode_positions(encode_positions(np.array([9, 2, 9, 2], dtype=np.int64))),
                                  np.array([2, 9], dtype=np.uint64))


# Golden vector for positions {0, 5, 1<<32 | 7}, every byte explained (Delta PROTOCOL.md "Deletion Vector Format"
# and the RoaringFormatSpec: portable 64-bit = bucket count + per bucket key and a 32-bit portable bitmap).
_GOLDEN = bytes.fromhex(
    "d1d33964"            # Delta magic 1681511377 as int32 little-endian
    "0200000000000000"    # number of 32-bit buckets (int64 LE): 2 (high keys 0 and 1)
    "00000000"            # bucket key 0 (uint32 LE)
    "3a300000"            # 32-bit roaring cookie 12346 (SERIAL_COOKIE_NO_RUNCONTAINER) as uint32 LE
    "01000000"            # one 16-bit container
    "0000" "0100"         # container key 0 (uint16 LE), cardinality - 1 = 1 (two values)
    "10000000"            # offset header: container data starts at byte 16 of this bitmap
    "0000" "0500"         # array container: 0, 5 (uint16 LE)
    "01000000"            # bucket key 1 (uint32 LE): positions 1<<32 | low
    "3a300000" "01000000" "0000" "0000" "10000000"   # cookie, 1 container, key 0 with 1 value, offset 16
    "0700"                # array container: 7
)


def test_golden_vector() -> None:
    positions = np.array([0, 5, (1 << 32) | 7], dtype=np.uint64)
    assert encode_positions(positions) == _GOLDEN
    np.testing.assert_array_equal(decode_positions(_GOLDEN), positions)


def test_golden_dv_file() -> None:
    data, ranges = encode_dv_file([_GOLDEN])
    assert ranges == [(1, len(_GOLDEN))]
    assert data == b"\x01" + struct.pack(">i", len(_GOLDEN)) + _GOLDEN + struct.pack(">I", zlib.crc32(_GOLDEN))


@pytest.mark.parametrize("data, problem", [
    (b"", "truncated"),
    (_GOLDEN[:8], "truncated"),
    (struct.pack("<i", 1681511376) + _GOLDEN[4:], "magic number 1681511376"),   # Delta's legacy "native" format
    (_GOLDEN[:-3], "truncated or corrupt"),
    (_GOLDEN[:20], "truncated or corrupt"),
])
def test_corrupt_vector(data: bytes, problem: str) -> None:
    with pytest.raises(DeletionVectorError, match=problem) as caught:
        decode_positions(data)
    assert isinstance(caught.value, FileStoreError)
    assert "\n" not in str(caught.value)


def test_corrupt_dv_file() -> None:
    data, [(offset, size)] = encode_dv_file([_GOLDEN])
    with pytest.raises(DeletionVectorError, match="size field"):
        read_dv(data, offset, size - 1)
    with pytest.raises(DeletionVectorError, match="outside"):
        read_dv(data, offset, size + 4)
    flipped = bytearray(data)
    flipped[offset + 10] ^= 0x01
    with pytest.raises(DeletionVectorError, match="CRC-32 mismatch"):
        read_dv(bytes(flipped), offset, size)
    with pytest.raises(DeletionVectorError, match="version 2"):
        read_dv(b"\x02" + data[1:], offset, size)
    with pytest.raises(DeletionVectorError, match="not a serialized deletion vector"):
        encode_dv_file([b"\0" * 16])


def test_invalid_positions() -> None:
    with pytest.raises(DeletionVectorError, match="negative"):
        encode_positions(np.array([3, -1]))
    with pytest.raises(DeletionVectorError, match="2\\*\\*63"):
        encode_positions(np.array([1 << 63], dtype=np.uint64))
    with pytest.raises(DeletionVectorError, match="integers"):
        encode_positions(np.array([1.5]))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=64))
def test_z85_round_trip(data: bytes) -> None:
    text = z85_encode(data)
    assert len(text) == 5 * -(-len(data) // 4)
    assert z85_decode(text, len(data)) == data
    assert z85_decode(text)[:len(data)] == data


def test_z85_spec_example() -> None:
    # https://rfc.zeromq.org/spec/32/: the 8 bytes 86 4F D2 6F B5 59 F7 5B encode as "HelloWorld"
    raw = bytes([0x86, 0x4F, 0xD2, 0x6F, 0xB5, 0x59, 0xF7, 0x5B])
    assert z85_encode(raw) == "HelloWorld"
    assert z85_decode("HelloWorld") == raw


def test_z85_corrupt() -> None:
    with pytest.raises(DeletionVectorError, match="multiple of 5"):
        z85_decode("abcd")
    with pytest.raises(DeletionVectorError, match="not a Z85 character"):
        z85_decode("abc\"e")
    with pytest.raises(DeletionVectorError, match="above 2\\*\\*32-1"):
        z85_decode("#####")


def test_delta_descriptor_matches_protocol_example() -> None:
    # Delta PROTOCOL.md, "JSON Example 1": prefix "ab" + Z85 of the UUID's 16 big-endian bytes
    dv_uuid = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    descriptor = delta_dv_descriptor("ab", dv_uuid, 4, 40, 6)
    assert descriptor == {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4,
                          "sizeInBytes": 40, "cardinality": 6}
    assert dv_file_name(dv_uuid) == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert uuid.UUID(bytes=z85_decode(descriptor["pathOrInlineDv"][-20:])) == dv_uuid  # type: ignore[index]
    assert delta_dv_descriptor("", dv_uuid, 1, 40, 6)["pathOrInlineDv"] == "^-aqEH.-t@S}K{vb[*k^"
    with pytest.raises(DeletionVectorError, match="relative"):
        delta_dv_descriptor("/ab", dv_uuid, 1, 40, 6)


def _write_delta_table(root: Path, files: dict[str, list[int]], deleted: dict[str, list[int]]) -> None:
    """A Delta table written by hand: one Parquet file per entry of `files` (column id), the deleted rows of each
    as deletion vectors in one DV file under the random prefix "ab"."""
    dv_uuid = uuid.uuid4()
    names = list(deleted)
    dv_bytes, ranges = encode_dv_file([encode_positions(np.array(deleted[n], dtype=np.uint64)) for n in names])
    (root / "ab").mkdir(parents=True)
    (root / "ab" / dv_file_name(dv_uuid)).write_bytes(dv_bytes)
    descriptors = {name: delta_dv_descriptor("ab", dv_uuid, offset, size, len(set(deleted[name])))
                   for name, (offset, size) in zip(names, ranges)}
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    actions: list[dict[str, object]] = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors"]}},
        {"metaData": {"id": str(uuid.uuid4()), "format": {"provider": "parquet", "options": {}},
                      "schemaString": json.dumps(schema), "partitionColumns": [],
                      "configuration": {"delta.enableDeletionVectors": "true"}, "createdTime": 0}},
    ]
    for name, ids in files.items():
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / name)
        add: dict[str, object] = {"path": name, "partitionValues": {}, "size": (root / name).stat().st_size,
                                  "modificationTime": 0, "dataChange": True,
                                  "stats": json.dumps({"numRecords": len(ids)})}
        if name in descriptors:
            add["deletionVector"] = descriptors[name]
        actions.append({"add": add})
    (root / "_delta_log").mkdir()
    (root / "_delta_log" / "00000000000000000000.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")


def _delta_rs_rows(root: Path) -> list[int]:
    deltalake = pytest.importorskip("deltalake")
    reader = pa.RecordBatchReader.from_stream(deltalake.DeltaTable(str(root)).scan())
    return sorted(reader.read_all().column("id").to_pylist())


def test_delta_rs_reads_the_deletion_vector(tmp_path: Path) -> None:
    _write_delta_table(tmp_path, {"part-0.parquet": [0, 1, 2, 3, 4]}, {"part-0.parquet": [1, 3]})
    assert _delta_rs_rows(tmp_path) == [0, 2, 4]


def test_delta_rs_reads_several_vectors_of_one_file(tmp_path: Path) -> None:
    # the second and third DVs sit at offsets > 1 of the shared DV file: delta-rs must find them there
    files = {"a.parquet": [10, 11, 12], "b.parquet": [20, 21, 22, 23], "c.parquet": [30, 31]}
    _write_delta_table(tmp_path, files, {"a.parquet": [0], "b.parquet": [0, 2, 3], "c.parquet": [1]})
    assert _delta_rs_rows(tmp_path) == [11, 12, 21, 30]


def test_pyiceberg_reads_the_puffin_file() -> None:
    puffin_module = pytest.importorskip("pyiceberg.table.puffin")   # pyiceberg's Puffin reader (0.10+)
    vectors = {"s3://b/data/a.parquet": [1, 3], "s3://b/data/b.parquet": [0, 7, (1 << 32) | 2, (3 << 32) | 9]}
    blobs = [(iceberg_dv_blob(np.array(p, dtype=np.uint64)), {"referenced-data-file": path, "cardinality": len(p)})
             for path, p in vectors.items()]
    data, ranges = write_puffin(blobs)
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    puffin = puffin_module.PuffinFile(data)
    for blob_meta, (offset, length), (blob, properties) in zip(puffin.footer.blobs, ranges, blobs):
        assert (blob_meta.type, blob_meta.snapshot_id, blob_meta.sequence_number) == ("deletion-vector-v1", -1, -1)
        assert (blob_meta.offset, blob_meta.length) == (offset, length)
        assert blob_meta.properties["cardinality"] == str(properties["cardinality"])
        assert puffin.get_blob_payload(blob_meta) == blob
        np.testing.assert_array_equal(read_dv(data[offset:offset + length], offset, length - 8),
                                      _expected(vectors[str(properties["referenced-data-file"])]))
    try:
        from pyiceberg.table.deletion_vector import deletion_vectors_from_puffin_file
        read = {dv.referenced_data_file: dv.to_vector().to_pylist() for dv in deletion_vectors_from_puffin_file(puffin)}
    except ImportError:   # before pyiceberg 0.12 (which deprecates it): PuffinFile.to_vector
        read = {path: vector.to_pylist() for path, vector in puffin.to_vector().items()}
    assert read == {path: sorted(p) for path, p in vectors.items()}
    with pytest.raises(DeletionVectorError, match="cardinality"):
        write_puffin([(blobs[0][0], {"referenced-data-file": "x"})])


def test_encode_is_vectorized() -> None:
    # a million positions over several buckets: the bulk pyroaring paths, no per-row Python
    positions = np.concatenate([np.arange(0, 2_000_000, 2, dtype=np.uint64),
                                np.arange(5 << 32, (5 << 32) + 10, dtype=np.uint64)])
    data = encode_positions(positions)
    np.testing.assert_array_equal(decode_positions(data), positions)
    assert dvformat.DELTA_DV_MAGIC == struct.unpack("<i", data[:4])[0]
