"""Maintenance operations as reports: compaction (with the table's shape before and after) and the per-partition
DESCRIBE DETAIL of some partition specs. One owner for the command line (`tablestore compact`, `describe`) and for
Spark SQL (`CALL managed.system.compact`, `DESCRIBE DETAIL ... PARTITION`), so both report the same numbers.

Partition specs as text: `column=value[,column=value...]`, several specs separated by `;` (the CLI repeats
`--partition` instead). Values cannot contain `,`, `;` or `=`. A value is written as the file store renders it:
`__DEFAULT_PARTITION__` is the null partition (as in Paimon and Hive), and a string value made of
`__DEFAULT_PARTITION__` and `%`s is written with one more `%` (filestore.partition); `partition_text` is the inverse,
so what `describe` prints can be given back.
"""
from __future__ import annotations

import json
import re
import time
from typing import Any, Callable, Iterable, Mapping, Sequence

from filestore import DEFAULT_PARTITION
from tablestore.errors import TableStoreError
from tablestore.table import Table


_MARKED = re.compile(f"^{re.escape(DEFAULT_PARTITION)}%*$")


def _value(text: str) -> str | None:
    if text == DEFAULT_PARTITION:
        return None
    return text[:-1] if _MARKED.match(text) else text


def _text(value: Any) -> str:
    if value is None:
        return DEFAULT_PARTITION
    return f"{value}%" if isinstance(value, str) and _MARKED.match(value) else str(value)


def parse_partition_spec(text: str) -> dict[str, str | None]:
    """`column=value[,column=value...]` as {column: value} (None: the null partition); TableStoreError when it is
    not of that form."""
    pairs = [p.partition("=") for p in text.split(",")]
    if any(not k.strip() or not eq for k, eq, _ in pairs):
        raise TableStoreError(f"partition spec {text!r}: give column=value[,column=value...]")
    return {k.strip(): _value(v.strip()) for k, _, v in pairs}


def partition_text(values: Mapping[str, Any]) -> str:
    """`column=value[,column=value...]` of a partition's {column: value}: the text `parse_partition_spec` reads
    back ("" for an unpartitioned table)."""
    return ",".join(f"{k}={_text(v)}" for k, v in values.items())


def parse_partition_specs(texts: Iterable[str]) -> list[dict[str, str | None]]:
    """Each text may hold several specs separated by `;` (empty parts are ignored)."""
    return [parse_partition_spec(part) for text in texts for part in text.split(";") if part.strip()]


def partition_details(table: Table, specs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """DESCRIBE DETAIL of the partitions any spec selects (all partitions without specs), sorted, no duplicates."""
    if not specs:
        return list(table.describe()["partitions"])  # type: ignore[call-overload]
    found: dict[str, dict[str, Any]] = {}
    for spec in specs:
        for p in table.describe(partition=spec)["partitions"]:  # type: ignore[attr-defined]
            found[json.dumps(p["partition"], sort_keys=True, default=str)] = p
    return [found[k] for k in sorted(found)]


def shape(partitions: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Files, bytes and sorted runs per bucket of some partitions' details."""
    runs = [n for p in partitions for n in p["sorted_runs"].values()]
    return {"files": sum(p["file_count"] for p in partitions), "bytes": sum(p["total_file_size"] for p in partitions),
            "buckets": len(runs), "max_runs_per_bucket": max(runs, default=0),
            "buckets_with_one_run": sum(1 for n in runs if n == 1)}


def compact(table: Table, *, full: bool = False, partitions: Sequence[Mapping[str, Any]] = (),
            progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Compact (synchronously) the partitions the specs select (all without specs) and report what it did:
    {table, snapshot_id (None: nothing to compact), full, partitions, seconds, before, after} where before/after
    are the `shape` of those partitions."""
    specs = list(partitions)
    before = shape(partition_details(table, specs))
    started = time.monotonic()
    sid = table.compact(full=full, partitions=specs or None, progress=progress)
    seconds = time.monotonic() - started
    after = shape(partition_details(table, specs))
    return {"table": table.name, "snapshot_id": sid, "full": full, "partitions": specs,
            "seconds": round(seconds, 3), "before": before, "after": after}
