"""The write path: input rows -> partition and bucket -> memtable -> flushed sorted runs -> commit messages.

Invariants:
1. Within a bucket, sequence numbers grow in input order, starting above the bucket's highest committed one, so
   a later row for the same key wins (one writer per bucket at a time, as FLIP-188 prescribes).
2. A memtable is flushed when its in-memory size passes `write-buffer-size` and at prepare-commit; a flush is
   merged with the one merge function (non-final, by the table's merge engine) and becomes one new sorted run at
   level 0: each key once, already merged, so a bucket of one run reads without a merge whatever the engine.
3. Nothing written here is visible until a commit publishes a snapshot naming the files.
"""
from __future__ import annotations

import logging
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore.bucket import bucket_of
from filestore.coerce import conform_table, normalize_keys
from filestore.gather import GatherSource
from filestore.errors import BucketMismatchError, InvalidWriteError, SchemaMismatchError
from filestore.live import LiveFiles
from filestore.merge import COUNT, KIND, SEQ, merge, merge_primary_key_winners
from filestore.merge_engine import check_retractions, prepare_input
from filestore.meta import CommitMessage, DataFileMeta, Partition, ValueKind
from filestore.parallel import pool, pool_size, wait_all
from filestore.partition import check_partition_names, render_partition_column
from filestore.context import StoreContext
from filestore.read import SplitRead
from filestore.scan import Split, keys_filter
from filestore.unchanged import fill_unchanged, match_keys, unchanged_cells


log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Chunk:
    """Rows appended to a memtable, not yet copied: rows `idx` of `source` with their sequence numbers and kinds.
    The flush takes them from `source` once, after the merge chose the winners (no copy per bucket before it).
    `seq`: the rows' sequence numbers, or the first of consecutive ones (an appended chunk's)."""

    source: GatherSource
    idx: np.ndarray
    seq: np.ndarray | int
    kinds: np.ndarray

    def sequence_numbers(self) -> np.ndarray:
        if isinstance(self.seq, np.ndarray):
            return self.seq
        return np.arange(self.seq, self.seq + len(self.idx), dtype=np.int64)


@dataclass
class _Memtable:
    next_sequence: int
    chunks: list[_Chunk] = field(default_factory=list)
    nbytes: int = 0
    flushed: list[DataFileMeta] = field(default_factory=list)
    pending: list["Future[list[DataFileMeta]]"] = field(default_factory=list)


_FEW_GROUPS = 16
_COUNT_BLOCK = 1 << 16
_PARALLEL_ROWS = 1 << 18  # an input this large is hashed and grouped in slices on the worker pool
BUCKET_CHECK_ROWS = 1024
"""Rows of each input that a write for one given bucket (`FileStoreWrite(..., bucket=b)`) still hashes, to check."""


def _groups(codes: np.ndarray) -> list[np.ndarray]:
    """The row numbers of each distinct code, in ascending code order, each in row order. A few groups (buckets
    of an unpartitioned table) are found by one comparison each (for a large input, the groups on the worker pool),
    more by a stable sort (a radix sort when the codes fit a small integer type). The key sort happens in the
    flush's merge, on the worker pool, per bucket."""
    top = int(codes.max(initial=0))
    if top < 1 << 20:  # counted a block at a time: bincount's copy of its input as int64 stays small
        counts = np.zeros(top + 1, dtype=np.int64)
        for start in range(0, len(codes), _COUNT_BLOCK):
            counts += np.bincount(codes[start : start + _COUNT_BLOCK], minlength=top + 1)
        present = np.flatnonzero(counts)
    else:
        present = np.unique(codes)
    if len(present) == 1:
        return [np.arange(len(codes))]
    if len(present) <= _FEW_GROUPS:
        if len(codes) < _PARALLEL_ROWS or pool_size() == 1:
            return [np.flatnonzero(codes == code) for code in present]
        return pool().map(lambda code: np.flatnonzero(codes == code), present)  # no pieces to concatenate
    narrow = np.int16 if codes.max(initial=0) < 2**15 else np.int64
    order = np.argsort(codes.astype(narrow), kind="stable")
    return np.split(order, np.flatnonzero(np.diff(codes[order])) + 1)


def _bytes_per_row(source: GatherSource) -> int:
    """The memtable's estimate of a row's in-memory size: the source's average plus 9 bytes of system columns."""
    return max(1, source.table.nbytes // max(1, source.table.num_rows)) + 9


Base = LiveFiles | Callable[[], LiveFiles] | None
"""The live files of the snapshot a write is based on, or how to read them when needed (None: the latest)."""


class FileStoreWrite:
    def __init__(self, context: StoreContext, max_sequence_numbers: dict[tuple[Partition, int], int], *,
                 bucket: int | None = None, base: Base = None) -> None:
        """`bucket`: every row written belongs to this bucket (the caller clustered the rows by the table's bucket
        function, e.g. a Spark write task per bucket): rows are not hashed, but the first BUCKET_CHECK_ROWS of each
        input are, and a row of another bucket fails that write with BucketMismatchError. `base`: the live files
        `max_sequence_numbers` come from, read only when a changelog's unchanged values need the keys' stored rows
        (`prepare`)."""
        self.context = context
        self.schema = context.schema
        self.bucket = bucket
        self._max_seq = max_sequence_numbers
        self._base = base
        self._memtables: dict[tuple[Partition, int], _Memtable] = {}
        self._writer = context.data_file_writer()
        self._in_flight: list["Future[list[DataFileMeta]]"] = []

    def conform(self, data: pa.Table) -> pa.Table:
        """Select and cast the input to the table's columns, with clear errors for what cannot fit."""
        target = self.schema.arrow_schema
        for name in self.schema.primary_keys:
            if name in data.schema.names and data.column(name).null_count:
                raise InvalidWriteError(f"table {self.context.table_name!r}: primary-key column {name!r} has nulls")
        missing = [f for f in target if f.name not in data.schema.names]
        required = [f.name for f in missing if not f.nullable]
        if required:
            raise SchemaMismatchError(f"table {self.context.table_name!r}: input lacks columns {required}")
        for f in missing:  # a nullable column the input lacks is null (e.g. a writer older than the column)
            data = data.append_column(f.name, pa.nulls(data.num_rows, f.type))
        extra = [n for n in data.schema.names if n not in target.names]
        if extra:
            raise SchemaMismatchError(
                f"table {self.context.table_name!r}: input has columns {extra} not in the table ({target.names})"
            )
        conformed = normalize_keys(conform_table(self.context.table_name, data, target), self.schema.key_columns)
        check_partition_names(self.context.table_name, self.schema.partition_keys, conformed)
        return conformed

    def prepare(self, data: pa.Table, kinds: np.ndarray | None = None) -> pa.Table:
        """`data` conformed (`conform`) and, for a changelog (`kinds` given) of a primary-key table, with the
        unchanged values a CDC source sent as placeholders replaced (filestore.unchanged): the rows `write` stores,
        which the caller logs."""
        data = self.conform(data)
        text = self.context.options.unavailable_value_placeholder
        if kinds is None or not text or not self.schema.has_primary_key or data.num_rows == 0:
            return data
        fixed = set(self.schema.key_columns) | set(self.schema.partition_keys)
        cells = unchanged_cells(data, [n for n in data.schema.names if n not in fixed], text)
        if not cells:
            return data
        return fill_unchanged(data, cells, self.schema.key_columns, self.context.options.merge_engine,
                              lambda rows, columns: self._stored(data.take(pa.array(rows)), columns))

    def _stored(self, rows: pa.Table, columns: Sequence[str]) -> pa.Table:
        """`columns` of the stored row of each of `rows`' keys (null where none): the base snapshot's files and the
        runs this writer flushed (its memtables of those buckets are flushed first)."""
        groups = self._grouped(rows, self._buckets(rows))
        for where, _ in groups:
            if where in self._memtables:
                self._flush(where, self._memtables[where])
        self._drain()
        if callable(self._base):
            self._base = self._base()
        base = self._base if self._base is not None else self.context.live_files(self.context.resolve_snapshot())
        key = self.schema.key_columns
        found = []
        for where, idx in groups:
            files = [*base.files_by_bucket([where]).get(where, []), *self._memtables.get(where, _Memtable(0)).flushed]
            if not files:
                continue
            asked = rows.take(pa.array(idx))
            split = Split(base.snapshot_id or 0, where[0], where[1],
                          tuple(sorted(files, key=lambda f: f.min_sequence_number)))
            found.append(SplitRead(self.context, [*key, *columns], keys_filter(asked, key)[0]).read(split))
        stored = pa.concat_tables(found) if found else self.schema.arrow_schema.empty_table().select([*key, *columns])
        return match_keys(rows, stored, key, columns)

    def write(self, data: pa.Table, kinds: np.ndarray | None = None, *, conformed: bool = False) -> np.ndarray:
        """Apply `data` in row order; `kinds` holds a ValueKind per row (all ADD when None). Returns each row's
        bucket (the log store writes a row to the Kafka partition of that number). `conformed`: `data` is the
        result of `prepare` already (the caller needed those rows too), so it is not prepared again."""
        if not conformed:
            data = self.prepare(data, kinds)
        n = data.num_rows
        if n == 0:
            return np.zeros(0, dtype=np.int32)
        kind_arr = np.zeros(n, dtype=np.int8) if kinds is None else np.asarray(kinds, dtype=np.int8)
        if kind_arr.shape != (n,):
            raise InvalidWriteError(f"table {self.context.table_name!r}: {len(kind_arr)} row kinds for {n} rows")
        engine = self.context.options.merge_engine
        if self.schema.has_primary_key and not engine.is_default:
            value_columns = [c for c in self.schema.arrow_schema.names if c not in self.schema.primary_keys]
            check_retractions(self.context.table_name, engine, kind_arr, value_columns)
            data = prepare_input(data, engine)
        buckets = self._buckets(data)
        source = GatherSource(data)  # every flush takes its rows from it
        for where, idx in self._grouped(data, buckets):
            self._append(where, source, idx, kind_arr[idx])
        return buckets

    def _grouped(self, data: pa.Table, buckets: np.ndarray) -> list[tuple[tuple[Partition, int], np.ndarray]]:
        """The rows of each (partition, bucket) of `data`, each group in row order."""
        group_codes = buckets  # int32; int64 once partitions are folded in
        dictionaries = []
        multiplier = self.context.options.bucket
        for name in self.schema.partition_keys:
            encoded = pc.dictionary_encode(render_partition_column(data.column(name))).combine_chunks()
            dictionaries.append(encoded.dictionary.to_pylist())
            group_codes = group_codes + encoded.indices.to_numpy().astype(np.int64) * multiplier
            multiplier *= max(1, len(encoded.dictionary))
        grouped = []
        for idx in _groups(group_codes):
            first = int(idx[0])
            code = int(group_codes[first])
            rest, partition = code // self.context.options.bucket, []
            for d in dictionaries:
                partition.append(d[rest % max(1, len(d))])
                rest //= max(1, len(d))
            grouped.append(((tuple(partition), int(buckets[first])), idx))
        return grouped

    def _buckets(self, data: pa.Table) -> np.ndarray:
        """`bucket_of` every row (or the write's one `bucket`, checked on a sample); a large input is hashed in
        slices on the worker pool (the hashing releases the GIL), with the same result."""
        keys, num_buckets = self.schema.bucket_key_columns, self.context.options.bucket
        if self.bucket is not None:
            found = bucket_of(data.slice(0, BUCKET_CHECK_ROWS), keys, num_buckets)
            if (found != self.bucket).any():
                raise BucketMismatchError(self.context.table_name, self.bucket, int(found[found != self.bucket][0]))
            return np.full(data.num_rows, self.bucket, dtype=np.int32)
        size = pool_size()
        if size == 1 or data.num_rows < _PARALLEL_ROWS or num_buckets == 1:
            return bucket_of(data, keys, num_buckets)
        step = -(-data.num_rows // size)
        out = np.empty(data.num_rows, dtype=np.int32)

        def hash_slice(start: int) -> None:
            bucket_of(data.slice(start, step), keys, num_buckets, out=out[start : start + step])

        pool().map(hash_slice, range(0, data.num_rows, step))
        return out

    def _append(self, where: tuple[Partition, int], source: GatherSource, idx: np.ndarray, kinds: np.ndarray) -> None:
        """Append rows `idx` of `source` in slices that fit the write buffer, so one large write still flushes at
        the bound (the in-memory size of a row estimated by `_bytes_per_row`)."""
        bytes_per_row = _bytes_per_row(source)
        step = max(1, -(-self.context.options.write_buffer_size // bytes_per_row))  # a full slice fills the buffer
        for start in range(0, len(idx), step):
            self._append_slice(where, source, idx[start : start + step], kinds[start : start + step], bytes_per_row)

    def _append_slice(
        self, where: tuple[Partition, int], source: GatherSource, idx: np.ndarray, kinds: np.ndarray, bytes_per_row: int
    ) -> None:
        mem = self._memtables.get(where)
        if mem is None:
            mem = self._memtables[where] = _Memtable(next_sequence=self._max_seq.get(where, -1) + 1)
        n = len(idx)
        mem.chunks.append(_Chunk(source, idx, mem.next_sequence, kinds))
        mem.next_sequence += n
        mem.nbytes += n * bytes_per_row
        if mem.nbytes >= self.context.options.write_buffer_size:
            self._flush(where, mem)

    def _records(self, chunk: _Chunk) -> pa.Table:
        """A chunk as records: system columns, then its rows taken from the source. The row numbers come from
        `_groups` and the merge (each below the source's length), so `take` skips its bounds check."""
        rows = chunk.source.take(chunk.idx)
        system: dict[str, pa.Array] = {SEQ: pa.array(chunk.sequence_numbers())}
        if self.schema.has_primary_key:
            system[KIND] = pa.array(chunk.kinds, pa.int8())
        else:
            system[KIND] = pa.array(np.zeros(len(chunk.idx), dtype=np.int8))
            system[COUNT] = pa.array(np.where(chunk.kinds == int(ValueKind.DELETE), -1, 1).astype(np.int64))
        return pa.Table.from_arrays([*system.values(), *rows.columns], names=[*system.keys(), *rows.schema.names])

    def _merged_run(self, chunks: list[_Chunk]) -> pa.Table | _Chunk:
        """The memtable merged (non-final) into a sorted run. For a primary-key table written once since the last
        flush the merge runs on the keys, sequence numbers and kinds alone, and the answer is the winning rows of
        the source in key order, not yet taken (the file writer takes them one row group at a time)."""
        keys = self.schema.key_columns
        engine = self.context.options.merge_engine
        if not self.schema.has_primary_key or len(chunks) > 1 or not engine.is_default:
            records = pa.concat_tables([self._records(c) for c in chunks])
            return merge(records, keys, primary_key=self.schema.has_primary_key, final=False, engine=engine)
        (chunk,) = chunks
        seq = chunk.sequence_numbers()
        key_records = pa.table({SEQ: pa.array(seq), KIND: pa.array(chunk.kinds, pa.int8()),
                                **{k: chunk.source.table.column(k).take(pa.array(chunk.idx)) for k in keys}})
        winners = merge_primary_key_winners(key_records, keys, final=False)
        if winners is None:
            return _Chunk(chunk.source, chunk.idx, seq, chunk.kinds)
        w = winners.to_numpy()
        # the winners' sequence numbers and kinds without a gather where they follow from their positions (each
        # gather by `w`, a key order, misses the cache at every row)
        first, kinds = chunk.kinds[:1], chunk.kinds
        kinds_w = np.full(len(w), first[0], kinds.dtype) if len(w) and (kinds == first[0]).all() else kinds[w]
        seq_w = w + chunk.seq if isinstance(chunk.seq, int) else seq[w]
        return _Chunk(chunk.source, chunk.idx[w], seq_w.astype(np.int64, copy=False), kinds_w)

    def _flush(self, where: tuple[Partition, int], mem: _Memtable) -> None:
        """Merge and write the memtable as a level-0 run on the shared worker pool (pyarrow releases the GIL, so
        buckets flush in parallel); at most `pool_size()` flushes are in flight, which bounds the memory held."""
        if not mem.chunks:
            return
        chunks = mem.chunks
        mem.chunks, mem.nbytes = [], 0
        while len(self._in_flight) >= pool_size():
            self._in_flight.pop(0).exception()  # wait; its error is raised where its memtable is drained
        future = pool().submit(self._write_run, where, chunks)
        mem.pending.append(future)
        self._in_flight.append(future)

    def _write_run(self, where: tuple[Partition, int], chunks: list[_Chunk]) -> list[DataFileMeta]:
        run = self._merged_run(chunks)
        if isinstance(run, pa.Table):
            files = self._writer.write_run(run, where[0], where[1], level=0)
        else:
            files = self._write_chunk(run, where)
        log.debug("flushed %s rows into %s files for %s", sum(len(c.idx) for c in chunks), len(files), where)
        return files

    def _write_chunk(self, run: _Chunk, where: tuple[Partition, int]) -> list[DataFileMeta]:
        """Write the rows of a chunk (in key order) as a run, taken from the source one row group at a time."""
        def rows(start: int, length: int) -> pa.Table:
            end = start + length
            return self._records(_Chunk(run.source, run.idx[start:end], seq[start:end], run.kinds[start:end]))

        seq = run.sequence_numbers()
        schema = self._records(_Chunk(run.source, run.idx[:0], seq[:0], run.kinds[:0])).schema
        bytes_per_row = _bytes_per_row(run.source)
        return self._writer.write_rows(schema, len(run.idx), bytes_per_row * len(run.idx), rows, where[0], where[1],
                                       level=0)

    def _drain(self) -> None:
        """Wait for every flush in flight (all of them, even after a failure, so no write outlives this call) and
        move their files to their memtables; the first failure is raised."""
        wait_all(self._in_flight)
        self._in_flight = []
        for mem in self._memtables.values():
            pending, mem.pending = mem.pending, []
            for future in pending:
                mem.flushed.extend(future.result())

    def prepare_commit(self) -> list[CommitMessage]:
        """Flush every memtable; the files written since the last prepare-commit, per partition and bucket."""
        messages = []
        for where, mem in self._memtables.items():
            self._flush(where, mem)
        self._drain()
        for where, mem in self._memtables.items():
            if mem.flushed:
                messages.append(
                    CommitMessage(where[0], where[1], self.context.options.bucket, added=tuple(mem.flushed))
                )
                mem.flushed = []
        return messages
