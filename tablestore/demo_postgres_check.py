"""The check of `tablestore demo` (tablestore/demo_postgres.py): every managed table against PostgreSQL, the oracle,
and the downstream revenue against Postgres's own sum; and the latency of the orders' versions.

A PostgreSQL value is compared as the managed table holds it (docs/cdc.md's table of PostgreSQL types): int,
bigint, boolean, text and varchar as they are; numeric(p,s) as a Decimal; timestamptz as an aware datetime in UTC;
timestamp(6) as a naive datetime (µs); text[] as a list. Debezium's placeholder for a TOASTed value it did not send
is never a value a table may hold.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import tablestore
from tablestore import demo_postgres_workload as workload

PLACEHOLDER = "__debezium_unavailable_value"
KEY = "id"
SHOWN = 10
"""Differences printed per table (then how many more)."""


def as_stored(value: Any) -> Any:
    """A value psycopg gives, as the managed table holds it (only timestamptz differs: UTC)."""
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc)
    return value


@dataclass(frozen=True)
class Observed:
    """One look at both sides. Per PostgreSQL table: its columns and rows (ordered by id) and the managed table's
    columns and rows (None: no such managed table yet); Postgres's revenue per customer."""

    source: Mapping[str, tuple[list[str], list[dict[str, Any]]]]
    managed: Mapping[str, tuple[list[str], list[dict[str, Any]]] | None]
    revenue: Mapping[int, Decimal]


def observe(conn: Any, catalog: tablestore.Catalog, database: str) -> Observed:
    """Both sides now: `conn` an autocommit psycopg connection to the source database."""
    with conn.transaction():   # one snapshot of every table
        source = {t: workload.rows(conn, t) for t in workload.tables(conn)}
        revenue = workload.revenue(conn)
    managed: dict[str, tuple[list[str], list[dict[str, Any]]] | None] = {}
    for t in source:
        name = f"{database}.{t}"
        if catalog.table_exists(name):
            data = catalog.get_table(name).read()
            managed[t] = (data.schema.names, data.to_pylist())
        else:
            managed[t] = None
    return Observed(source, managed, revenue)


def differences(seen: Observed, database: str, downstream: Mapping[int, Decimal]) -> list[str]:
    """One line per difference (at most `SHOWN` per table, then a count): each table, then the revenue."""
    lines: list[str] = []
    for t, (columns, want) in seen.source.items():
        lines += _capped(f"{database}.{t}", _table_differences(f"{database}.{t}", columns, want, seen.managed[t]))
    pg, down = _nonzero(seen.revenue), _nonzero(downstream)
    lines += _capped("revenue", [
        f"revenue of customer {c}: the downstream query has {down.get(c, 0)}, PostgreSQL {pg.get(c, 0)}"
        for c in sorted(pg.keys() | down.keys()) if pg.get(c) != down.get(c)])
    return lines


def toast_kept(seen: Observed, customers: set[int]) -> int:
    """How many of `customers` have the note PostgreSQL has in the managed table (never the placeholder)."""
    managed = seen.managed.get("customers")
    if managed is None:
        return 0
    want = {r[KEY]: r["note"] for r in seen.source["customers"][1] if r[KEY] in customers}
    got = {r[KEY]: r.get("note") for r in managed[1] if r[KEY] in customers}
    return sum(1 for k, note in want.items() if got.get(k) == note and note != PLACEHOLDER)


def placeholders_sent(spark: Any, bootstrap: str, topic: str) -> int:
    """How many records of `topic` carry Debezium's placeholder (a TOASTed value the update left alone)."""
    from pyspark.sql import functions as F

    records = (spark.read.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
               .option("startingOffsets", "earliest").load())
    return int(records.filter(F.col("value").cast("string").contains(PLACEHOLDER)).count())


def order_latencies(table: tablestore.Table, since: float) -> np.ndarray:
    """Seconds, per version of an order made after `since` (epoch s): from its `updated_at` (`clock_timestamp()`
    in its transaction, just before the commit) to the commit time of the first snapshot of the table holding it.
    Every APPEND snapshot is read once, in order; a version is (id, updated_at)."""
    since_us = int(since * 1_000_000)
    seen: pa.Table | None = None
    found: list[np.ndarray] = []
    for snapshot in table.snapshots():
        if snapshot.kind != "APPEND":
            continue
        data = table.read(columns=[KEY, "updated_at"], snapshot_id=snapshot.id)
        micros = pc.cast(pc.cast(data["updated_at"], pa.timestamp("us")), pa.int64())
        versions = pa.table({KEY: data[KEY], "us": micros}).filter(pc.field("us") >= since_us)
        new = versions if seen is None else versions.join(seen, keys=[KEY, "us"], join_type="left anti")
        found.append((snapshot.time_millis * 1000 - new["us"].to_numpy()) / 1e6)
        seen = new if seen is None else pa.concat_tables([seen, new])
    return np.concatenate(found) if found else np.array([])


def pct(values: np.ndarray, q: float) -> float:
    return float(np.percentile(values, q)) if len(values) else float("nan")


# ---------------------------------------------------------------------------------------------- internals


def _table_differences(name: str, columns: list[str], want: list[dict[str, Any]],
                       managed: tuple[list[str], list[dict[str, Any]]] | None) -> list[str]:
    if managed is None:
        return [f"{name}: no such managed table (PostgreSQL's has {len(want):,} rows)"]
    names, got = managed
    lines = [f"{name}: no column {c} (PostgreSQL's table has it)" for c in columns if c not in names]
    shared = [c for c in columns if c in names]
    want_by = {r[KEY]: r for r in want}
    got_by = {r[KEY]: r for r in got}
    lines += [f"{name} id={k}: missing (PostgreSQL has it)" for k in sorted(want_by.keys() - got_by.keys())]
    lines += [f"{name} id={k}: not in PostgreSQL" for k in sorted(got_by.keys() - want_by.keys())]
    for k in sorted(want_by.keys() & got_by.keys()):
        for c in shared:
            w, g = as_stored(want_by[k][c]), got_by[k][c]
            if g == PLACEHOLDER:
                lines.append(f"{name} id={k}: {c} holds Debezium's placeholder for an unchanged TOASTed value")
            elif g != w:
                lines.append(f"{name} id={k}: {c} is {_short(g)}, PostgreSQL has {_short(w)}")
    return lines


def _capped(what: str, lines: list[str]) -> list[str]:
    if len(lines) <= SHOWN:
        return lines
    return lines[:SHOWN] + [f"{what}: {len(lines) - SHOWN:,} more differences"]


def _nonzero(revenue: Mapping[int, Decimal]) -> dict[int, Decimal]:
    return {c: v for c, v in revenue.items() if v != 0}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"
