"""The records of one `ingest-database` micro-batch decoded into every table they hold by one plan: each table's
decoder (tablestore/spark/cdc_decode.py `decode_sql`, over the batch's rows of its route) is a branch of one
`UNION ALL`, written as one SQL text with the bad-record policy and the metrics of every table, so that Spark
analyses the micro-batch's decoding once (a DataFrame per table, then a union of them, had Spark analyse the growing
plan again at every step).

The union's rows are the tables' changes in shared *slots*: `__t` (the table's index), then a table's columns of
one Spark type in that type's slots, in order (`slots`), so the union is as wide as the widest table per type, not
as wide as all of them: Spark hands every cell of a row to the writing Python task, null or not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from logstore import ROW_KIND_COLUMN
from tablestore.spark.cdc_decode import ERROR, FIRST, META_COLUMNS, TS, decode_sql, kept
from tablestore.spark.cdc_formats import DecodeSpec, ident, lit
from tablestore.spark.types import spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

TABLE_INDEX = "__t"
SLOT = "__s{}"
Layout = tuple[tuple[tuple[str, int], ...], ...]
"""Per table index: its columns (`_row_kind` first), each with the slot holding it."""


@dataclass(frozen=True)
class Packed:
    rows: "DataFrame"
    """`__t` and the slots."""
    layout: Layout


def slots(schemas: Sequence[Sequence[tuple[str, str]]]) -> tuple[list[str], Layout]:
    """The shared slots of tables whose columns are `schemas` ((name, Spark type DDL) each): the slots' types, and
    where each table's columns go (a table's n-th column of a type: that type's n-th slot)."""
    types: list[str] = []
    by_type: dict[str, list[int]] = {}
    layout = []
    for columns in schemas:
        used: dict[str, int] = {}
        placed = []
        for name, ddl in columns:
            n = used[ddl] = used.get(ddl, -1) + 1
            of_type = by_type.setdefault(ddl, [])
            if n == len(of_type):
                of_type.append(len(types))
                types.append(ddl)
            placed.append((name, of_type[n]))
        layout.append(tuple(placed))
    return types, tuple(layout)


def _columns(spec: DecodeSpec) -> list[tuple[str, str]]:
    return [(ROW_KIND_COLUMN, "string"), *[(f.name, spark_type(f.type, f.name).simpleString()) for f in spec.schema]]


def decode_tables(spark: "SparkSession", view: str, route: str, tables: Sequence[tuple[str, DecodeSpec]],
                  observation: Any) -> Packed:
    """The records of temporary view `view` (column `route`: each record's source table) decoded into each of
    `tables` ((route, spec): the records of that route decoded by that spec), the bad-record policy of each applied
    (their format and policy are the job's: one for all). `observation` gets, per table index i, `rows_i` (the
    changes passed on), `bad_i` (the bad records skipped, each once) and `max_ts_i` (the newest event's time, epoch
    ms).

    The caller keeps `view` until the rows are written: dropping a temporary view uncaches the data cached under its
    plan (Spark's `dropTempView`), and a micro-batch's cached records uncached are fetched from Kafka again by every
    table's branch."""
    from pyspark.sql import functions as F

    types, layout = slots([_columns(spec) for _, spec in tables])

    def branch(i: int) -> str:
        source, spec = tables[i]
        held = {slot: name for name, slot in layout[i]}
        cells = [f"CAST({ident(held[k])} AS {ddl})" if k in held else f"CAST(NULL AS {ddl})"
                 for k, ddl in enumerate(types)]
        records = f"(SELECT * FROM {view} WHERE {ident(route)} = {lit(source)}) AS records"
        return (f"SELECT {i} AS {TABLE_INDEX}, {', '.join(f'{c} AS {SLOT.format(k)}' for k, c in enumerate(cells))}, "
                f"{', '.join(META_COLUMNS)} FROM ({decode_sql(spec, records)})")

    decoded = spark.sql(" UNION ALL ".join(f"({branch(i)})" for i in range(len(tables))))
    metrics = [F.expr(f"count(CASE WHEN {TABLE_INDEX} = {i} AND {ERROR} IS NULL THEN 1 END)").alias(f"rows_{i}")
               for i in range(len(tables))]
    metrics += [F.expr(f"count(CASE WHEN {TABLE_INDEX} = {i} AND {ERROR} IS NOT NULL AND {FIRST} THEN 1 END)")
                .alias(f"bad_{i}") for i in range(len(tables))]
    metrics += [F.expr(f"max(CASE WHEN {TABLE_INDEX} = {i} THEN {TS} END)").alias(f"max_ts_{i}")
                for i in range(len(tables))]
    names = f"element_at(array({', '.join(lit(spec.table) for _, spec in tables)}), {TABLE_INDEX} + 1)"
    first = tables[0][1]
    keep = kept(names, first.format, first.bad_records)
    return Packed(decoded.observe(observation, *metrics).filter(F.expr(keep))
                  .select(TABLE_INDEX, *[SLOT.format(k) for k in range(len(types))]), layout)


__all__ = ["Layout", "Packed", "SLOT", "TABLE_INDEX", "decode_tables", "slots"]
