"""What the deletion-vector and view tests share: a three-column primary-key table's rows at a version, deletes of
keys, one history of upserts, deletes and compactions, and rows compared whatever their order."""
from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

import tablestore

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("v", pa.float64())])


def rows(ids: list[int] | range, version: int, schema: pa.Schema = SCHEMA, **extra: list[Any]) -> pa.Table:
    """Rows of keys `ids` as written at `version` (name and v say which); a column of `schema` beyond the three
    holds `version` unless `extra` gives its values."""
    ids = list(ids)
    data: dict[str, Any] = {"id": ids, "name": [f"n{i}-{version}" for i in ids], "v": [float(version)] * len(ids),
                            **extra}
    for f in schema:
        data.setdefault(f.name, [version] * len(ids))
    return pa.table(data, schema=schema)


def deletes(ids: list[int], schema: pa.Schema = SCHEMA, **extra: list[Any]) -> pa.Table:
    """A changelog deleting keys `ids`."""
    return rows(ids, 0, schema, **extra).append_column("_row_kind", pa.array(["-D"] * len(ids)))


def write_history(table: tablestore.Table, *, final_compaction: bool = False) -> None:
    """Upserts over a first write, deletes, a universal compaction, a write of new and old keys (and a full
    compaction): every kind of commit that sets positions in vectors."""
    table.write(rows(range(100), 1))
    table.write(rows(range(0, 100, 3), 2))
    table.write(deletes(list(range(0, 100, 7))))
    table.compact(full=False)
    table.write(rows(range(90, 120), 3))
    if final_compaction:
        table.compact(full=True)


def normalized(records: pa.Table | list[dict[str, Any]], columns: list[str]) -> list[str]:
    """`columns` of every row as sorted JSON texts: two reads compare equal whatever their row order."""
    if isinstance(records, pa.Table):
        records = records.select(columns).to_pylist()
    return sorted(json.dumps({c: r[c] for c in columns}, sort_keys=True, default=str) for r in records)
