"""The changelog normalizer, vectorised: an upsert stream in, a regular changelog out, a batch at a time.

Same semantics as ``ChangelogNormalizer`` (its per-row rules, with ``generate_update_before`` and no TTL), which
stays the reference and the oracle of the property test. Per key, the state is the last row stored (absent ==
never seen or deleted); "same content" is binary equality of the whole row's key-codec bytes.

How a batch is processed without a Python loop per row:
1. key bytes of every row (``KeyCodec.encode_columns``), dictionary-encoded into one code per distinct key;
2. the row before each row *of the same key*: the previous occurrence in the batch (a stable sort by code), or
   for a key's first occurrence the stored row (one dict lookup per distinct key);
3. what each row emits follows from (addition?, has previous row?, same content?) as boolean masks:
   addition, no previous -> +I row; addition, other content -> -U previous (when generating update-before), +U row;
   addition, same content -> nothing; retraction, previous -> -D previous; retraction, no previous -> nothing;
4. the output rows are taken from the stored rows, the batch's earlier rows and its own rows, in input order;
5. the state becomes, per key, the batch's last row if it is an addition, nothing if it is a retraction.
Stored rows live in an append-only Arrow table indexed by a dict (key bytes -> position), rebuilt when more than
half of it is dead.
"""
from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from itertools import repeat

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import logstore
from filestore import KeyCodec
from tablestore.materializer.errors import InvalidRowKindError, RowShapeError

_FULL = "__full_row_bytes"
_MIN_REBUILD = 1 << 16


class ArrowChangelogNormalizer:
    """Normalizes batches of changes (`_row_kind` + the columns of `schema`) by the key columns `key`."""

    def __init__(self, schema: pa.Schema, key: Sequence[str], *, generate_update_before: bool = True) -> None:
        missing = [k for k in key if k not in schema.names]
        if not key or missing:
            raise RowShapeError(tuple(schema.names), f"key columns {list(key)} must be columns of the rows")
        self.schema = pa.schema([pa.field(f.name, f.type) for f in schema])
        self.key = tuple(key)
        self.generate_update_before = generate_update_before
        self._key_codec = KeyCodec([self.schema.field(k).type for k in key])
        self._row_codec = KeyCodec(self.schema.types)
        self._index: dict[bytes, int] = {}
        self._chunks: list[pa.Table] = []
        self._stored = 0  # rows appended to the store (live and dead)

    def __len__(self) -> int:
        """How many keys have a stored row."""
        return len(self._index)

    def seed(self, rows: pa.Table) -> None:
        """Start from `rows` (at most one per key, e.g. a table's rows at a snapshot) as the stored state, in place
        of any state: what feeding them as +I would leave, without computing the output."""
        rows = pa.Table.from_arrays([rows.column(f.name).cast(f.type) for f in self.schema], schema=self.schema)
        keys = self._key_codec.encode_columns([rows.column(k) for k in self.key]).to_pylist()
        self._chunks = [rows.append_column(_FULL, self._row_codec.encode_columns(rows.columns)).combine_chunks()]
        self._index = dict(zip(keys, range(rows.num_rows)))
        self._stored = rows.num_rows

    def _take_stored(self, positions: np.ndarray, columns: Sequence[str]) -> pa.Table:
        """The stored rows at `positions` (in that order), taken chunk by chunk (no copy of the whole store)."""
        empty = self.schema.append(pa.field(_FULL, pa.binary())).empty_table().select(list(columns))
        if not len(positions):
            return empty
        starts = np.cumsum([0] + [c.num_rows for c in self._chunks[:-1]])
        chunk_of = np.searchsorted(starts, positions, side="right") - 1
        by_chunk = np.argsort(chunk_of, kind="stable")
        parts = [empty]
        for c in np.unique(chunk_of).tolist():
            local = positions[chunk_of == c] - starts[c]
            parts.append(self._chunks[c].select(list(columns)).take(pa.array(local)))
        taken = pa.concat_tables(parts).combine_chunks()
        return taken.take(pa.array(np.argsort(by_chunk, kind="stable")))

    def process_batch(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """The changes `batch` normalizes to, as a table of its schema (the `_row_kind` column where it was)."""
        table = batch if isinstance(batch, pa.Table) else pa.Table.from_batches([batch])
        column = logstore.ROW_KIND_COLUMN
        if table.schema.names.count(column) != 1:
            raise RowShapeError(tuple(table.schema.names), f"a batch of changes needs exactly one {column!r} column")
        try:
            kinds = logstore.row_kinds_of(table)
        except logstore.InvalidRowKindError as e:
            raise InvalidRowKindError.of(e) from None
        n = table.num_rows
        if n == 0:
            return table.slice(0, 0)
        rows = pa.Table.from_arrays([table.column(f.name).cast(f.type) for f in self.schema], schema=self.schema)
        is_add = logstore.addition_mask(kinds)

        # 1. one code per distinct key
        key_bytes = self._key_codec.encode_columns([rows.column(k) for k in self.key])
        encoded = pc.dictionary_encode(key_bytes)
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        distinct = encoded.dictionary.to_pylist()
        # 2. the previous row of the same key: earlier in the batch, or stored
        order = np.argsort(codes, kind="stable")
        first = np.ones(n, dtype=bool)
        first[1:] = codes[order][1:] != codes[order][:-1]
        prev_pos = np.full(n, -1, dtype=np.int64)
        prev_pos[order[~first]] = order[np.flatnonzero(~first) - 1]
        stored_of_code = np.fromiter(map(self._index.get, distinct, repeat(-1)), dtype=np.int64, count=len(distinct))
        in_batch = prev_pos >= 0
        stored_pos = np.where(in_batch, -1, stored_of_code[codes])
        has_prev = np.where(in_batch, is_add[np.maximum(prev_pos, 0)], stored_pos >= 0)

        # 3. what each row emits
        full = self._row_codec.encode_columns(rows.columns)
        from_store = np.flatnonzero(has_prev & ~in_batch)
        from_batch = np.flatnonzero(has_prev & in_batch)
        same = np.zeros(n, dtype=bool)
        for where, previous in ((from_store[is_add[from_store]], None), (from_batch[is_add[from_batch]], full)):
            if len(where):  # the row's key-codec bytes against its previous row's
                prev_bytes = (self._take_stored(stored_pos[where], [_FULL]).column(_FULL) if previous is None
                              else previous.take(pa.array(prev_pos[where])))
                equal = pc.equal(prev_bytes, full.take(pa.array(where)))
                same[where] = np.asarray(equal.to_numpy(zero_copy_only=False), dtype=bool)
        emit_before = has_prev & ~is_add | (has_prev & is_add & ~same & self.generate_update_before)
        emit_after = is_add & ~same

        # 4. output rows in input order: (row, 0) the previous row, (row, 1) the row itself
        before = np.flatnonzero(emit_before)
        before_store = before[~in_batch[before]]
        before_batch = before[in_batch[before]]
        after = np.flatnonzero(emit_after)
        pieces = [self._take_stored(stored_pos[before_store], self.schema.names).cast(self.schema),
                  rows.take(pa.array(prev_pos[before_batch])),
                  rows if len(after) == n else rows.take(pa.array(after))]
        slots = np.concatenate([before_store * 2, before_batch * 2, after * 2 + 1])
        out_kinds = np.concatenate([
            np.where(is_add[before_store], logstore.RowKind.UPDATE_BEFORE.value, logstore.RowKind.DELETE.value),
            np.where(is_add[before_batch], logstore.RowKind.UPDATE_BEFORE.value, logstore.RowKind.DELETE.value),
            np.where(has_prev[after], logstore.RowKind.UPDATE_AFTER.value, logstore.RowKind.INSERT.value),
        ]).astype(object)
        perm = np.argsort(slots, kind="stable")
        out_rows = pa.concat_tables(pieces)
        if len(before):  # else already in input order
            out_rows = out_rows.combine_chunks().take(pa.array(perm))
        out_kind_array = pa.array(out_kinds[perm], pa.string())

        # 5. the state: per key, the batch's last row when it adds, nothing when it retracts
        last = np.ones(n, dtype=bool)
        last[:-1] = codes[order][1:] != codes[order][:-1]
        last_pos = order[last]
        last_add = np.sort(last_pos[is_add[last_pos]])  # in input order: the chunk's rows are stored so
        last_retract = last_pos[~is_add[last_pos]]
        index = self._index
        if len(last_retract):
            deque(map(index.pop, map(distinct.__getitem__, codes[last_retract].tolist()), repeat(None)), maxlen=0)
        if len(last_add):
            if len(last_add) == n:  # every row is its key's last, and adds: store the batch as it is
                chunk = rows.append_column(_FULL, full)
            else:
                chunk = rows.take(pa.array(last_add)).append_column(_FULL, full.take(pa.array(last_add)))
            self._chunks.append(chunk.combine_chunks())
            if len(self._chunks) > 32:
                self._chunks = [pa.concat_tables(self._chunks).combine_chunks()]
            base = self._stored
            index.update(zip(map(distinct.__getitem__, codes[last_add].tolist()),
                             range(base, base + len(last_add))))
            self._stored += len(last_add)
        if self._stored > max(_MIN_REBUILD, 2 * len(index)):
            self._rebuild()

        columns = [out_kind_array if f.name == column else out_rows.column(f.name).cast(f.type)
                   for f in table.schema]
        return pa.Table.from_arrays(columns, schema=table.schema)

    def _rebuild(self) -> None:
        """Drop the dead rows of the store (keys overwritten or deleted since they were stored)."""
        keys = list(self._index)
        positions = np.fromiter(self._index.values(), dtype=np.int64, count=len(keys))
        self._chunks = [self._take_stored(positions, [*self.schema.names, _FULL])]
        self._index = dict(zip(keys, range(len(keys))))
        self._stored = len(keys)
