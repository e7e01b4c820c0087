"""The one and only bucket function of a table. The log store receives bucket numbers from here; nothing else hashes.

bucket(row) = siphash-2-4(order-preserving key bytes of the bucket key) mod num_buckets, where the bucket key is
the primary key, or the whole row for a table without one. The hash is pandas' `hash_array` on bytes (SipHash with
pandas' fixed key, then pandas' 64-bit mix), which is deterministic across processes and machines. This is an
on-disk contract: changing it moves rows to other buckets, so tests pin known values. `filestore.siphash` computes the
same hash with numpy for keys of one byte length (fixed-width key types), tested equal to pandas.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
from pandas.util import hash_array

from filestore.keycodec import KeyCodec
from filestore.keycodec_columns import signed_int_values, stored_as_signed_int
from filestore.siphash import hash_binary, hash_signed_int_keys


def key_hashes(table: pa.Table, key_columns: Sequence[str]) -> np.ndarray:
    """uint64 hash of each row's bucket key, vectorised. A key of one signed-integer-like column without nulls (the
    common primary key) is hashed from its values (`hash_signed_int_keys`, tested equal to the general path)."""
    columns = [table.column(c) for c in key_columns]
    if len(columns) == 1 and columns[0].null_count == 0 and stored_as_signed_int(columns[0].type):
        chunks = [c for c in columns[0].chunks if len(c)]
        if not chunks:
            return np.empty(0, dtype=np.uint64)
        hashes = [hash_signed_int_keys(signed_int_values(c)) for c in chunks]
        return hashes[0] if len(hashes) == 1 else np.concatenate(hashes)
    codec = KeyCodec([c.type for c in columns])
    return hash_binary(codec.encode_columns(columns))


_BLOCK_ROWS = 1 << 16


def bucket_of(table: pa.Table, key_columns: Sequence[str], num_buckets: int, *,
              out: np.ndarray | None = None) -> np.ndarray:
    """int32 bucket number of each row of `table` (written into `out` when given, of the table's length). Hashed a
    block of rows at a time: the hashes and remainders of a block stay in the CPU's cache, and no temporary of
    the input's length is allocated (fresh memory costs a large write kernel time in page faults)."""
    if out is None:
        out = np.empty(table.num_rows, dtype=np.int32)
    if num_buckets == 1 or table.num_rows == 0:
        out[:] = 0
        return out
    for start in range(0, table.num_rows, _BLOCK_ROWS):
        hashes = key_hashes(table.slice(start, _BLOCK_ROWS), key_columns)
        np.remainder(hashes, np.uint64(num_buckets), out=hashes)
        out[start : start + len(hashes)] = hashes
    return out


def bucket_of_key(values: Sequence[object], types: Sequence[pa.DataType], num_buckets: int) -> int:
    """The bucket of one key, e.g. for a point lookup; equal to `bucket_of` on a one-row table."""
    encoded = KeyCodec(types).encode(values)
    return int(hash_array(np.array([encoded], dtype=object), categorize=False)[0] % np.uint64(num_buckets))
