"""DESCRIBE DETAIL (FLIP-188) of a table's files, and partition specs given by users ({column: value}).

Kept out of `tablestore.table` so that the table class stays a thin facade: the file-level detail is a pure
function of one snapshot's live files.
"""
from __future__ import annotations

import datetime as dt
from collections import defaultdict
from typing import Any, Callable, Mapping, Sequence

import pyarrow as pa

from filestore import DataFileMeta, ManifestEntry, Partition, partition_value, render_partition_column, sorted_runs
from tablestore.errors import TableStoreError


def iso_time(millis: int | None) -> str | None:
    if millis is None:
        return None
    return dt.datetime.fromtimestamp(millis / 1000, tz=dt.timezone.utc).isoformat(timespec="milliseconds")


def partition_spec(table_name: str, schema: pa.Schema, partition_by: Sequence[str],
                   values: Mapping[str, Any]) -> dict[str, str]:
    """{partition column: rendered value} of a user's {column: value} (a value of the column's type, or a string
    that casts to it; None is the null partition). TableStoreError for other columns or values that do not fit."""
    unknown = [k for k in values if k not in partition_by]
    if unknown:
        raise TableStoreError(f"table {table_name!r}: {unknown} are not partition columns {list(partition_by)}")
    spec = {}
    for key, value in values.items():
        type_ = schema.field(key).type
        try:
            typed = pa.scalar(value).cast(type_) if value is not None else pa.scalar(None, type_)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
            raise TableStoreError(
                f"table {table_name!r}: partition value {value!r} does not fit column {key!r} of type {type_}: {e}"
            ) from None
        spec[key] = render_partition_column(pa.array([typed.as_py()], type_))[0].as_py()
    return spec


def matches(partition: Partition, partition_by: Sequence[str], spec: Mapping[str, str] | None) -> bool:
    if not spec:
        return True
    values = dict(zip(partition_by, partition))
    return all(values.get(k) == v for k, v in spec.items())


def partition_selector(table_name: str, schema: pa.Schema, partition_by: Sequence[str],
                       specs: Sequence[Mapping[str, Any]] | None) -> Callable[[Partition], bool] | None:
    """Whether a partition matches one of the users' {column: value} `specs` (None: every partition)."""
    if specs is None:
        return None
    rendered = [partition_spec(table_name, schema, partition_by, p) for p in specs]
    return lambda partition: any(matches(partition, partition_by, spec) for spec in rendered)


def file_detail(entries: Sequence[ManifestEntry], schema: pa.Schema, partition_by: Sequence[str],
                spec: Mapping[str, str] | None = None) -> dict[str, object]:
    """Files of the table (all of them) and of each partition (those `spec` selects): counts, sizes, levels,
    sorted runs per bucket, whether each bucket is one run (compacted), last modified."""
    by_partition: dict[Partition, dict[int, list[DataFileMeta]]] = defaultdict(lambda: defaultdict(list))
    for e in entries:
        if matches(e.partition, partition_by, spec):
            by_partition[e.partition][e.bucket].append(e.file)
    partitions = []
    for partition, buckets in sorted(by_partition.items()):
        files = [f for fs in buckets.values() for f in fs]
        runs = {str(b): len(sorted_runs(fs)) for b, fs in sorted(buckets.items())}
        partitions.append({
            "partition": {k: partition_value(v, schema.field(k).type).as_py() for k, v in zip(partition_by, partition)},
            "file_count": len(files),
            "total_file_size": sum(f.file_size for f in files),
            "record_count": sum(f.row_count for f in files),
            "sorted_runs": runs,
            "compacted": all(n == 1 for n in runs.values()),
            "last_modified": iso_time(max(f.creation_time_ms for f in files)),
        })
    levels: dict[str, int] = defaultdict(int)
    for e in entries:
        levels[str(e.file.level)] += 1
    return {
        "file_count": len(entries),
        "files_per_level": dict(sorted(levels.items(), key=lambda kv: int(kv[0]))),
        "total_file_size": sum(e.file.file_size for e in entries),
        "partitions": partitions,
    }


def log_detail(log_store: Any, has_primary_key: bool) -> dict[str, str]:
    """DESCRIBE DETAIL's log: the log system and, for kafka, its topic, bootstrap servers, formats, modes and
    retention (FLIP-188's log.retention: the topic's retention.ms, or the Kafka cluster's default)."""
    if log_store is None:
        return {"system": "none"}
    o = log_store.options
    return {"system": "kafka", "topic": o.topic, "bootstrap": o.bootstrap_servers, "format": o.format,
            "key-format": o.key_format if has_primary_key else "none", "changelog-mode": o.changelog_mode,
            "consistency": o.consistency, "scan": o.scan,
            "retention": "cluster default" if o.retention_ms is None else f"{o.retention_ms} ms"}
