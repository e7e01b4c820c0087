"""The merge read on workers: split -> runs -> one merge -> drop deletes -> filter -> project -> Arrow.

Each stage is a small function over Arrow tables; no per-row Python. `read_run` is the one way to read a bucket's
runs, used by reads and by compaction:
- a primary-key bucket whose files form one sorted run holds each key once, in key order: its files are read and
  concatenated without a merge (a final read only drops its DELETE records, if it has any);
- otherwise every file is read and the records go through the one merge function (filestore.merge), or, for one
  integer key and runs with disjoint sequence ranges (an LSM bucket's), through its equivalent by run order
  (`newest_run_winners`, or the table's merge engine on the records in `run_order`: no sequence numbers needed, so
  a read does not read them; not for an order by `sequence.field`).
A bucket of one sorted run holds each key once, already merged by the table's merge engine (flush and compaction
apply it), so reading it without a merge is right for every engine.
A read's filter is handed to the Parquet reader, which skips row groups by their statistics (files are sorted by
key, so a key range touches few row groups), whenever filtering before the merge cannot change the answer: for a
single run (one version per key), for a table without a primary key (every version of a row has the same values),
and for a filter on key and partition columns only (every version of a key is kept or dropped together).
A table with deletion vectors is read without a merge at all: each file minus its deleted positions, the filter
pushed into every file (filestore.deletion).
Splits of one read are read in parallel on the file store's worker pool.
Every file is opened through `FileStore.read_file`, which reads a file written under another schema under this
store's (filestore.evolution); a split holding files newer than the store's schema is read by a reader of the newest
one and projected back onto this reader's columns.
"""
from __future__ import annotations

from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from filestore import compact_pick
from filestore.errors import FileStoreError, SchemaMismatchError
from filestore.evolution import newer_names, project_to
from filestore.keycodec_columns import signed_int_values, stored_as_signed_int
from filestore.merge import COUNT, KIND, SEQ, expand_counts, merge, newest_run_winners, run_order
from filestore.merge_rules import merge_by_engine
from filestore.meta import DataFileMeta, ValueKind
from filestore.parallel import pool
from filestore.scan import Split, check_filter
from filestore.context import StoreContext



class SplitRead:
    def __init__(
        self, context: StoreContext, columns: Sequence[str] | None = None, filter: pc.Expression | None = None
    ) -> None:
        self.context = context
        schema = context.schema.arrow_schema
        unknown = [c for c in columns or () if c not in schema.names]
        if unknown:
            raise SchemaMismatchError(f"table {context.table_name!r} has no columns {unknown}; columns: {schema.names}")
        if filter is not None:
            check_filter(schema, filter, context.table_name)
        self.columns = list(columns) if columns is not None else list(schema.names)
        self.filter = filter
        system = [SEQ, KIND] + ([] if context.schema.has_primary_key else [COUNT])
        # a filter may name any column: read them all then; otherwise the projection plus the key
        order = context.options.merge_engine.sequence_fields  # a merge by sequence.field orders by them
        needed = schema.names if filter is not None else _union([*context.schema.key_columns, *order], self.columns)
        self._row_columns = [c for c in schema.names if c in set(needed)]
        self._file_columns = system + self._row_columns
        self.output_schema = pa.schema([schema.field(c) for c in self.columns])
        self._key_filter = filter is not None and (not context.schema.has_primary_key or _binds_only(
            filter, pa.schema([schema.field(c)
                               for c in _union(context.schema.key_columns, context.schema.partition_keys)])
        ))

    def read_records(
        self, split: Split, filter: pc.Expression | None = None, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """The raw records of a split's files in the split's file order (every version of every key); `filter`,
        if given, is applied while reading (row groups skipped); `columns` default to the system columns plus
        what the read needs."""
        names = list(columns) if columns is not None else self._file_columns
        tables = [self.context.read_file(split.partition, split.bucket, f, names, filter) for f in split.files]
        return _concat(tables) if tables else self._empty_records().select(names)

    def _empty_records(self) -> pa.Table:
        schema = self.context.schema.arrow_schema
        fields = [pa.field(SEQ, pa.int64()), pa.field(KIND, pa.int8()), pa.field(COUNT, pa.int64())]
        by_name = {f.name: f for f in fields} | {f.name: f for f in schema}
        return pa.schema([by_name[c] for c in self._file_columns]).empty_table()

    def single_run(self, split: Split) -> bool:
        """Whether the split's files are one sorted run of a primary-key table (each key once, in key order)."""
        return self.context.schema.has_primary_key and len(compact_pick.sorted_runs(split.files)) <= 1

    def read_run(self, split: Split, *, final: bool, filter: pc.Expression | None = None) -> pa.Table:
        """The split's runs merged into one sorted run (system columns included): what a merge of every record
        gives, DELETE records dropped when `final`. `filter` must be one that may be applied before the merge."""
        s = self.context.schema
        if self.context.newest_schema(split.files).id != s.id:
            raise FileStoreError(f"table {self.context.table_name!r}: a reader of schema {s.id} cannot merge files "
                                 f"written under a newer schema; use the store of the newest schema")
        if self.single_run(split):
            files = sorted(split.files, key=lambda f: f.min_key)
            run = self.read_records(Split(split.snapshot_id, split.partition, split.bucket, tuple(files)), filter)
            if final and any(f.delete_row_count for f in files):
                run = run.filter(pc.equal(run.column(KIND), pa.scalar(int(ValueKind.ADD), pa.int8())))
            return run
        by_run_order = self._merge_by_run_order(split, filter, self._file_columns, final=final)
        if by_run_order is not None:
            return by_run_order
        records = self.read_records(split, filter)
        return merge(records, s.key_columns, primary_key=s.has_primary_key, final=final,
                     engine=self.context.options.merge_engine)

    def plain_files(self, split: Split) -> tuple[DataFileMeta, ...] | None:
        """The split's files in key order when their row columns, read as they are, are exactly what `read` gives
        (a primary-key table's one sorted run without deletes, no filter to apply, every file written under a schema
        with the table's columns and types); else None. Another reader (Spark's own Parquet reader) may then read
        them."""
        if self.filter is not None or not self.single_run(split) or any(
                f.delete_row_count or f.deletion_vector is not None for f in split.files):
            return None
        c = self.context
        if not all(f.schema_id == c.schema.id or c.layout(f.schema_id).plain for f in split.files):
            return None  # written under an older schema: read through filestore.evolution
        return tuple(sorted(split.files, key=lambda f: f.min_key))

    def merge_runs(self, split: Split) -> list[tuple[DataFileMeta, ...]] | None:
        """The split's sorted runs, newest first, each's files in key order, when keeping per key the record of the
        highest sequence number and dropping a DELETE winner gives exactly what `read` gives (a primary-key table of
        the default merge engine, no filter to apply, every file written under a schema with the table's columns and
        types); else None. Another reader (the Spark jar's merge, jvm/read/MergeSplits.java) may then merge them."""
        c = self.context
        engine = c.options.merge_engine
        if (self.filter is not None or not c.schema.has_primary_key or (engine is not None and not engine.is_default)
                or not all(f.schema_id == c.schema.id or c.layout(f.schema_id).plain for f in split.files)):
            return None
        return [run.files for run in compact_pick.sorted_runs(split.files)]

    def read(self, split: Split) -> pa.Table:
        s = self.context.schema
        newest = self.context.newest_schema(split.files)
        if newest.id != s.id:  # this handle is older than some of the files: merge under theirs, then project
            names = newer_names(s, newest, self.columns, self.filter, self.context.table_name)
            newer = SplitRead(self.context.evolved(newest), names, self.filter)
            return project_to(newer.read(split), self.output_schema, self.context.table_name)
        single = self.single_run(split)
        pushed = self.filter is not None and (self._key_filter or single or split.plain)
        filter = self.filter if pushed else None
        if split.plain:  # every live record is a final row: the files minus their deleted rows (filestore.deletion)
            merged = self.read_records(split, filter, self._row_columns)
        elif single and not any(f.delete_row_count for f in split.files):
            # one run, nothing to drop: the projected columns of its files in key order, no system columns
            files = tuple(sorted(split.files, key=lambda f: f.min_key))
            one_run = Split(split.snapshot_id, split.partition, split.bucket, files)
            merged = self.read_records(one_run, filter, self._row_columns)
        elif (by_run_order := self._merge_by_run_order(split, filter, self._row_columns, final=True)) is not None:
            merged = by_run_order  # no sequence numbers read
        else:
            merged = self.read_run(split, final=True, filter=filter)
        if not s.has_primary_key:
            merged = expand_counts(merged)
        if self.filter is not None and not pushed:
            merged = merged.filter(self.filter)
        return merged.select(self.columns).cast(self.output_schema)

    def _merge_by_run_order(
        self, split: Split, filter: pc.Expression | None, columns: Sequence[str], *, final: bool
    ) -> pa.Table | None:
        """`columns` of the merge of the split's runs, computed without sequence numbers (a read need not read
        them): for a primary-key table with one integer key whose runs have disjoint sequence ranges (an LSM
        bucket's runs do: a compaction merges the newest runs), a key's newest record is the one of its newest run
        (filestore.merge.newest_run_winners); another merge engine merges the records in that order (run_order).
        None when that does not apply: the caller merges by sequence number."""
        s = self.context.schema
        key = s.key_columns[0] if len(s.key_columns) == 1 else None
        engine = self.context.options.merge_engine
        fields = engine.sequence_fields  # run order is arrival order: an order by them only for deduplicate's max
        by_field = engine.name == "deduplicate" and len(fields) == 1 and pa.types.is_signed_integer(
            s.arrow_schema.field(fields[0]).type)
        if key is None or not s.has_primary_key or not stored_as_signed_int(s.arrow_schema.field(key).type) or (
                fields and not by_field):
            return None
        runs = _runs_oldest_first(compact_pick.sorted_runs(split.files))
        if runs is None:
            return None
        files = [f for run in runs for f in sorted(run.files, key=lambda f: f.min_key)]
        tables = [  # value kinds are read from files with deletes: the others' are all ADD
            self.context.read_file(split.partition, split.bucket, f,
                                 [KIND] * (bool(f.delete_row_count) and KIND not in columns) + list(columns), filter)
            for f in files
        ]
        kinds = [t.column(KIND).to_numpy() if KIND in t.column_names else np.zeros(t.num_rows, np.int8)
                 for t in tables]
        records = _concat([t.select(columns) for t in tables])
        keys = records.column(key)
        if keys.null_count:
            return None
        file_rows = iter([t.num_rows for t in tables])
        run_lengths = [sum(next(file_rows) for _ in run.files) for run in runs]
        if not engine.is_default:  # the engine's merge, in the order the runs give (no sequence numbers needed)
            order = run_order(signed_int_values(keys.combine_chunks()), run_lengths)
            all_kinds = np.concatenate(kinds)
            if all_kinds.any() and KIND not in records.column_names:
                records = records.append_column(KIND, pa.array(all_kinds, pa.int8()))
            return None if order is None else merge_by_engine(records, [key], engine, final=final, order=order)
        winners = newest_run_winners(
            signed_int_values(keys.combine_chunks()), run_lengths, np.concatenate(kinds), final=final)
        # the winners are indices into `records` by construction: Arrow's bounds check would only cost time
        return None if winners is None else pc.take(records, pa.array(winners), boundscheck=False)

    def read_all(self, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
        for split in splits:
            yield from self.read(split).to_batches()

    def to_table(self, splits: Sequence[Split]) -> pa.Table:
        """Every split read, in parallel on the worker pool; the result keeps the splits' order."""
        if len(splits) > 1:
            tables = list(pool().map(self.read, splits))
        else:
            tables = [self.read(split) for split in splits]
        return pa.concat_tables(tables) if tables else self.output_schema.empty_table()


def _concat(tables: Sequence[pa.Table]) -> pa.Table:
    """The tables one after another. Files written under other schemas (or by another writer) may differ in a
    field's nullability or metadata (a comment): then the fields are unified (nullable where any is)."""
    first = tables[0].schema
    if all(t.schema.equals(first) for t in tables[1:]):
        return pa.concat_tables(tables)
    return pa.concat_tables(tables, promote_options="default")


def _union(a: Sequence[str], b: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))


def _binds_only(filter: pc.Expression, schema: pa.Schema) -> bool:
    """Whether `filter` names only columns of `schema` (evaluating it on an empty table of them succeeds)."""
    try:
        schema.empty_table().filter(filter)
    except (pa.ArrowException, TypeError):
        return False
    return True


def _runs_oldest_first(runs: Sequence[compact_pick.SortedRun]) -> list[compact_pick.SortedRun] | None:
    """`runs` ordered by their sequence numbers, oldest first, when every record of a later run is newer than every
    record of an earlier one (their sequence ranges are disjoint); else None."""
    def span(run: compact_pick.SortedRun) -> tuple[int, int]:
        return min(f.min_sequence_number for f in run.files), max(f.max_sequence_number for f in run.files)

    ordered = sorted(runs, key=span)
    if any(span(a)[1] >= span(b)[0] for a, b in zip(ordered, ordered[1:])):
        return None
    return ordered
