"""The merge read on workers: split -> files -> one merge -> drop deletes -> filter -> project -> Arrow.

Each stage is a small function over Arrow tables; no per-row Python.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from filestore.datafile import read_data_file
from filestore.errors import SchemaMismatchError
from filestore.merge import COUNT, KIND, SEQ, expand_counts, merge
from filestore.scan import Split, check_filter

if TYPE_CHECKING:
    from filestore.store import FileStore


class SplitRead:
    def __init__(
        self, store: "FileStore", columns: Sequence[str] | None = None, filter: pc.Expression | None = None
    ) -> None:
        self.store = store
        schema = store.schema.arrow_schema
        unknown = [c for c in columns or () if c not in schema.names]
        if unknown:
            raise SchemaMismatchError(f"table {store.table_name!r} has no columns {unknown}; columns: {schema.names}")
        if filter is not None:
            check_filter(schema, filter, store.table_name)
        self.columns = list(columns) if columns is not None else list(schema.names)
        self.filter = filter
        system = [SEQ, KIND] + ([] if store.schema.has_primary_key else [COUNT])
        # a filter may name any column: read them all then; otherwise the projection plus the key
        needed = schema.names if filter is not None else _union(store.schema.key_columns, self.columns)
        self._file_columns = system + [c for c in schema.names if c in set(needed)]
        self.output_schema = pa.schema([schema.field(c) for c in self.columns])

    def read_records(self, split: Split) -> pa.Table:
        """The raw records of a split's files (every version of every key)."""
        tables = [
            read_data_file(
                self.store.io,
                self.store.paths.data_file(self.store.schema.partition_keys, split.partition, split.bucket, f.file_name),
                self.store.options.file_format,
                self._file_columns,
            )
            for f in split.files
        ]
        return pa.concat_tables(tables) if tables else self._empty_records()

    def _empty_records(self) -> pa.Table:
        schema = self.store.schema.arrow_schema
        fields = [pa.field(SEQ, pa.int64()), pa.field(KIND, pa.int8()), pa.field(COUNT, pa.int64())]
        by_name = {f.name: f for f in fields} | {f.name: f for f in schema}
        return pa.schema([by_name[c] for c in self._file_columns]).empty_table()

    def read(self, split: Split) -> pa.Table:
        s = self.store.schema
        merged = merge(self.read_records(split), s.key_columns, primary_key=s.has_primary_key, final=True)
        if not s.has_primary_key:
            merged = expand_counts(merged)
        if self.filter is not None:
            merged = merged.filter(self.filter)
        return merged.select(self.columns).cast(self.output_schema)

    def read_all(self, splits: Sequence[Split]) -> Iterator[pa.RecordBatch]:
        for split in splits:
            yield from self.read(split).to_batches()

    def to_table(self, splits: Sequence[Split]) -> pa.Table:
        tables = [self.read(split) for split in splits]
        return pa.concat_tables(tables) if tables else self.output_schema.empty_table()


def _union(a: Sequence[str], b: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))
