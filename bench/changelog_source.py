"""A Python streaming data source over a directory of changelog Parquet files, one file per offset step: the
same files the file source reads, delivered through PySpark's Python Data Source API (as the managed table's
streaming source will be). Used by spark_materialize_bench.py."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow

SCHEMA = "_row_kind string, id long, v string, seq long"


class _File(InputPartition):  # type: ignore[misc]
    def __init__(self, path: str) -> None:
        self.path = path


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):  # type: ignore[misc]
    def __init__(self, options: dict[str, str]) -> None:
        self.files = sorted(str(p) for p in Path(options["path"]).glob("*.parquet"))
        self.per_batch = int(options.get("filesperbatch", len(self.files)))
        self.target = len(self.files)
        self.rows = options.get("rows", "false") == "true"

    def initialOffset(self) -> dict[str, int]:
        return {"file": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = len(self.files)

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        return {"file": min(self.target, start["file"] + self.per_batch)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[_File]:
        return [_File(f) for f in self.files[start["file"] : end["file"]]]

    def read(self, partition: _File) -> Iterator[Any]:
        table = pq.read_table(partition.path)
        if self.rows:  # tuples, like the toy source of the reference measurements
            yield from zip(*(table.column(c).to_pylist() for c in table.column_names))
        else:
            yield from table.to_batches()

    def commit(self, end: dict[str, int]) -> None:
        pass


class ChangelogSource(DataSource):  # type: ignore[misc]
    @classmethod
    def name(cls) -> str:
        return "bench_changelog"

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> _Reader:
        return _Reader(dict(self.options))
