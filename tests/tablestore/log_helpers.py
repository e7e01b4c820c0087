"""Shared helpers of the log-store integration tests (tests/tablestore/test_log_*.py): catalogs bound to the real
broker, one schema, and changes read back as plain (kind, row) pairs a test can compare with what Flink emits."""
from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

import tablestore
from filestore import CommitMessage
from logstore.errors import LogStoreError

SESSION_BOOTSTRAP = "table-storage.log.properties.bootstrap.servers"
SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("name", pa.string()),
    pa.field("qty", pa.int32()),
    pa.field("price", pa.float64()),
    pa.field("ts", pa.timestamp("ms")),
])
Change = tuple[str, dict[str, Any]]


_CATALOGS: list[tablestore.Catalog] = []


def kafka_catalog(tmp_path: Path, bootstrap: str, **session: str) -> tablestore.Catalog:
    """A catalog over a fresh warehouse whose session points at `bootstrap`, with database `db`."""
    options = {SESSION_BOOTSTRAP: bootstrap, **{f"table-storage.{k}": v for k, v in session.items()}}
    cat = tablestore.Catalog(str(tmp_path / "wh"), options=options)
    cat.create_database("db")
    _CATALOGS.append(cat)
    return cat


def drop_created_tables() -> None:
    """Drop every table of the catalogs `kafka_catalog` made, so their topics do not pile up on the broker."""
    while _CATALOGS:
        cat = _CATALOGS.pop()
        for name in cat.list_tables("db"):
            with contextlib.suppress(tablestore.CatalogError, LogStoreError):
                cat.drop_table(f"db.{name}")


def rows(*specs: tuple[Any, ...], kinds: Iterable[str] | None = None) -> pa.Table:
    """A table of SCHEMA rows (id, name, qty, price, ts-millis), optionally a changelog with `_row_kind`."""
    columns: list[tuple[Any, ...]] = list(zip(*specs)) if specs else [() for _ in SCHEMA]
    arrays = [pa.array(list(col), f.type) for col, f in zip(columns, SCHEMA)]
    table = pa.Table.from_arrays(arrays, schema=SCHEMA)
    if kinds is not None:
        table = table.add_column(0, "_row_kind", pa.array(list(kinds), pa.string()))
    return table


def row(id_: int, name: str | None, qty: int | None = 1, price: float | None = 1.5, ts: int | None = 1_700_000_000_000
        ) -> tuple[Any, ...]:
    return (id_, name, qty, price, ts)


def as_dict(spec: tuple[Any, ...]) -> dict[str, Any]:
    """A row spec as `to_pylist` gives it back (timestamps as datetimes)."""
    return rows(spec).to_pylist()[0]


def changes(batches: Iterable[pa.RecordBatch]) -> list[Change]:
    """Every change of `batches` in order, as (row kind, row without `_row_kind`)."""
    out: list[Change] = []
    for batch in batches:
        assert batch.schema.names[0] == "_row_kind"
        for r in batch.to_pylist():
            kind = r.pop("_row_kind")
            out.append((kind, r))
    return out


def per_key(cs: Iterable[Change], key: str = "id") -> dict[Any, list[Change]]:
    """Changes grouped by primary key, each group in arrival order (Kafka orders a key's changes, not others)."""
    out: dict[Any, list[Change]] = {}
    for kind, r in cs:
        out.setdefault(r[key], []).append((kind, r))
    return out


def materialize(cs: Iterable[Change], key: str = "id") -> dict[Any, dict[str, Any]]:
    """Apply a changelog to a keyed state: +I/+U put the row, -U/-D remove the key (they must find it)."""
    state: dict[Any, dict[str, Any]] = {}
    for kind, r in cs:
        if kind in ("+I", "+U"):
            state[r[key]] = r
        else:
            assert r[key] in state, f"{kind} of a key the changelog never added: {r}"
            assert state.pop(r[key]) == r, f"{kind} does not carry the row it retracts: {r}"
    return state


def by_key(table: pa.Table, key: str = "id") -> Mapping[Any, dict[str, Any]]:
    return {r[key]: r for r in table.to_pylist()}


def task_files(t: tablestore.Table, data: pa.Table) -> list[CommitMessage]:
    """What a Spark executor task hands the driver: the files of `data`, written on the latest snapshot."""
    store = t._handle.store
    writer = store.new_write(store.live_files(store.snapshots.latest()))
    writer.write(writer.conform(data), None, conformed=True)
    return writer.prepare_commit()
