"""Scan planning on the driver: snapshot -> manifests -> live files -> splits (one per partition and bucket).

Pruning never opens a data file. Each file gets a *guarantee*, an Arrow expression every row of the file satisfies
(its partition values, and min <= column <= max from the manifest's statistics); Arrow's expression simplifier then
drops the files whose guarantee contradicts the filter. Only columns whose versions cannot hide each other are used:
- partition columns always;
- primary-key tables: the key columns only. Skipping on a value column could hide the newer version of a key and
  resurrect an older one.
- tables without a primary key: every column (key = whole row, so all versions of a row have the same values).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from filestore.errors import SchemaMismatchError
from filestore.keycodec import decode_value
from filestore.live import LiveFiles
from filestore.meta import DataFileMeta, ManifestEntry, Partition, Snapshot
from filestore.partition import partition_value
from filestore.context import StoreContext



@dataclass(frozen=True)
class Split:
    """The unit of reading: the live files of one partition and bucket at one snapshot."""

    snapshot_id: int
    partition: Partition
    bucket: int
    files: tuple[DataFileMeta, ...]
    plain: bool = False
    """The files are every live file of the bucket with the deletion vectors of the snapshot (a table with
    `deletion-vectors.enabled`, planned by the scan): read minus their deleted rows, they are the table's rows,
    without a merge (filestore.deletion). False: the read merges."""

    @property
    def row_count(self) -> int:
        return sum(f.row_count for f in self.files)


def _bounds(lo: bytes, hi: bytes, type_: pa.DataType) -> tuple[pa.Scalar, pa.Scalar] | None:
    """Typed bounds for a guarantee, or None when they cannot be trusted: nanosecond values do not survive the
    trip through Python objects, and NaN (the largest float in key order) compares false in expressions."""
    if getattr(type_, "unit", None) == "ns":
        return None
    low, high = decode_value(lo, type_), decode_value(hi, type_)
    if isinstance(high, float) and math.isnan(high):
        return None
    return pa.scalar(low, type_), pa.scalar(high, type_)


def _cast_bounds(bounds: tuple[pa.Scalar, pa.Scalar], type_: pa.DataType) -> tuple[pa.Scalar, pa.Scalar] | None:
    """Bounds of a file's own (older or newer) column type as bounds of the table's type, None when they do not
    convert (then they are not used: pruning never guesses)."""
    try:
        return bounds[0].cast(type_, safe=True), bounds[1].cast(type_, safe=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return None


def keys_filter(keys: pa.Table, columns: Sequence[str]) -> tuple[pc.Expression, pc.Expression | None]:
    """Filters for the rows whose key (`columns`) is among the rows of `keys`: (each key column's value in that
    column's set of values: exact for one key column, a superset for a composite key; the span of each column's
    values, which prunes the files and row groups whose key range holds none of them, None when there is none: a
    float column's NaN lies outside any min/max). Keys are never null (key columns are NOT NULL)."""
    exact: pc.Expression | None = None
    bounds: pc.Expression | None = None
    for k in columns:
        values = pc.unique(keys.column(k).drop_null())
        term = pc.field(k).isin(values)
        exact = term if exact is None else exact & term
        if len(values) and not pa.types.is_floating(values.type):
            extremes = pc.min_max(values)
            span = (pc.field(k) >= extremes["min"]) & (pc.field(k) <= extremes["max"])
            bounds = span if bounds is None else bounds & span
    assert exact is not None, "a key has at least one column"
    return exact, bounds


def check_filter(schema: pa.Schema, filter: object, table_name: str) -> None:
    """A filter is a boolean `pyarrow.compute.Expression` over the table's columns; SchemaMismatchError otherwise
    (evaluated once on an empty table, so the user gets a typed error naming the table, not an Arrow one)."""
    try:
        schema.empty_table().filter(filter)
    except (pa.ArrowException, TypeError) as e:
        raise SchemaMismatchError(f"table {table_name!r}: invalid filter {filter}: {e}") from e


class FileStoreScan:
    def __init__(self, context: StoreContext) -> None:
        self.context = context
        schema = context.schema
        self._types = {f.name: f.type for f in schema.arrow_schema}
        self._skip_columns = set(schema.primary_keys) if schema.has_primary_key else set(schema.arrow_schema.names)

    def plan(self, snapshot: Snapshot | None, filter: pc.Expression | None = None) -> list[Split]:
        if filter is not None:
            check_filter(self.context.schema.arrow_schema, filter, self.context.table_name)
        if snapshot is None:
            return []
        return self.plan_live(self.context.live_files(snapshot), filter)

    def plan_live(self, live: LiveFiles, filter: pc.Expression | None = None,
                  where: tuple[Partition | None, int | None] = (None, None)) -> list[Split]:
        """`plan` of live files already read; `where` = (partition, bucket) keeps one partition, one bucket or both
        (None: any)."""
        if live.snapshot is None:
            return []
        partition, bucket = where
        entries = [e for e in live.entries.values()
                   if (partition is None or e.partition == partition) and (bucket is None or e.bucket == bucket)]
        if filter is not None:
            entries = self._prune(entries, filter)
        grouped: dict[tuple[Partition, int], list[DataFileMeta]] = defaultdict(list)
        for e in entries:
            grouped[(e.partition, e.bucket)].append(live.file(e.identifier))
        plain = self.context.options.deletion_vectors and self.context.schema.has_primary_key
        return [
            Split(live.snapshot.id, partition, bucket, tuple(sorted(files, key=lambda f: f.min_sequence_number)),
                  plain)
            for (partition, bucket), files in sorted(grouped.items())
        ]

    def _guarantee(self, entry: ManifestEntry) -> pc.Expression:
        terms: list[pc.Expression] = []
        for key, rendered in zip(self.context.schema.partition_keys, entry.partition):
            value = partition_value(rendered, self._types[key])
            terms.append(pc.field(key).is_null() if not value.is_valid else pc.field(key) == value)
        # a file written under an older schema: its statistics are of its own types, and a column added since
        # reads as null in every row of it (filestore.evolution); a newer file's extra columns are not filtered on
        layout = None if entry.file.schema_id == self.context.schema.id else self.context.layout(entry.file.schema_id)
        # (its statistics name its own columns: a renamed column's under its old name, a dropped one's too)
        for s in entry.file.stats:
            name = s.column if layout is None else layout.target_names.get(s.column)
            if name is None or name not in self._skip_columns or name in self.context.schema.partition_keys:
                continue
            type_ = self._types[name]
            field = pc.field(name)
            if s.min is None or s.max is None:
                terms.append(field.is_null())
                continue
            file_type = layout.file_types.get(name, type_) if layout is not None else type_
            bounds = _bounds(s.min, s.max, file_type)
            if bounds is not None and not file_type.equals(type_):
                bounds = _cast_bounds(bounds, type_)
            if bounds is None:
                continue
            lo, hi = bounds
            in_range = (field >= lo) & (field <= hi)
            terms.append(in_range | field.is_null() if s.null_count else in_range)
        if layout is not None:
            terms += [pc.field(name).is_null() for name in sorted(layout.missing) if name in self._skip_columns]
        guarantee = pc.scalar(True)
        for t in terms:
            guarantee = guarantee & t
        return guarantee

    def _prune(self, entries: Sequence[ManifestEntry], filter: pc.Expression) -> list[ManifestEntry]:
        if not entries:
            return []
        fmt = ds.ParquetFileFormat()
        fs = self.context.io.arrow_fs()
        by_path = {}
        fragments = []
        for i, e in enumerate(entries):
            path = f"/{i}"  # never opened: get_fragments only simplifies the filter against the guarantee
            by_path[path] = e
            fragments.append(fmt.make_fragment(path, filesystem=fs, partition_expression=self._guarantee(e)))
        dataset = ds.FileSystemDataset(fragments, self.context.schema.arrow_schema, fmt, fs)
        return [by_path[f.path] for f in dataset.get_fragments(filter=filter)]
