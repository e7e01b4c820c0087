"""`materialize_for_sink(df, "db.orders")`: a streaming changelog made safe for the table's primary key before
`df.writeStream.format("managed")`, by the table option `sink.upsert-materialize` (or `upsert_materialize=`).

A changelog whose upsert key (the key its producer keeps changes in order for) is not the table's primary key, or
is unknown (`upsert_key=None`: e.g. after a join shuffled by another column, the blog's case), can deliver a key's
`-U` after its `+U`: applied as is, the key would be deleted. The upsert materializer
(tablestore.spark.upsert_materialize, the JVM operator) keeps each key's history and emits the primary key's
correct changelog. A Python data-source sink cannot insert an operator in front of itself, so this step is applied
to the DataFrame by the caller; the sink itself writes what it gets.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Sequence

from logstore import ROW_KIND_COLUMN
from tablestore.spark.source_options import DataSourceOptionError, table_ref

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Mode = Literal["none", "force", "auto"]


def needs_materializer(mode: str, *, changelog: bool, primary_key: Sequence[str],
                       upsert_key: Sequence[str] | None) -> bool:
    """The rule of `sink.upsert-materialize` (Flink's): force always, none never, auto when the input is a changelog
    whose upsert key is unknown or not the primary key."""
    if mode == "force":
        return True
    if mode == "none" or not changelog or not primary_key:
        return False
    return upsert_key is None or sorted(upsert_key) != sorted(primary_key)


def materialize_for_sink(df: "DataFrame", table: str, *, upsert_key: Sequence[str] | None = None,
                         upsert_materialize: Mode | None = None, warehouse: str | None = None,
                         order_by: str | None = None) -> "DataFrame":
    """`df`, through the upsert materializer when the mode says so (see the module); the table's
    `upsert-materialize.*` options configure it. `order_by`: a column giving a key's arrival order within a
    micro-batch (see upsert_materialize)."""
    from catalog import SINK_UPSERT_MATERIALIZE, UPSERT_MATERIALIZE_STRATEGY, UPSERT_MATERIALIZE_TTL
    from tablestore.spark.materialize import upsert_materialize as materialize

    handle = table_ref({"path": table} | ({"warehouse": warehouse} if warehouse else {})).handle()
    raw = dict(handle.options.raw)
    mode = upsert_materialize or raw.get(SINK_UPSERT_MATERIALIZE.key) or SINK_UPSERT_MATERIALIZE.default
    try:
        mode = str(SINK_UPSERT_MATERIALIZE.parse(str(mode)))
    except Exception as e:  # the option's own error names the value and the choices
        raise DataSourceOptionError(f"table {table!r}: {e}") from None
    primary_key = list(handle.schema.primary_keys)
    if not needs_materializer(mode, changelog=ROW_KIND_COLUMN in df.columns, primary_key=primary_key,
                              upsert_key=upsert_key):
        return df
    if not primary_key:
        raise DataSourceOptionError(f"table {table!r} has no primary key: sink.upsert-materialize=force needs one")
    strategy = raw.get(UPSERT_MATERIALIZE_STRATEGY.key, UPSERT_MATERIALIZE_STRATEGY.default)
    ttl = raw.get(UPSERT_MATERIALIZE_TTL.key)
    return materialize(df, primary_key, upsert_key, str(strategy), ttl, order_by=order_by)
