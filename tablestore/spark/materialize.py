"""The upsert materializer inside a Spark job: `groupByKey(primary key).flatMapGroupsWithState` running the
JVM operator of the tablestore Spark jar (`jar.py`, `java/tablestore/spark/jvm/`), its state in the query's
RocksDB state store and checkpoints. The semantics are the library's (tablestore.materializer), held equal by a
differential test.

State layout, chosen for few state calls: ONE value per primary key holding the key's whole history (rows and
write times, oldest first). Per key and micro-batch: one read, every event of the batch run against an
in-memory ordered multiset (O(1) per event, whatever the strategy), one write (or a remove when the history
emptied). The strategies differ in how the FLIP stores state per event; with one read and one write per key and
micro-batch they give the same output at the same cost here, except LEGACY's per-key TTL.

Order: within a micro-batch the events of a key are processed in the order Spark delivers them, or sorted by
`order_by` when given (an arrival sequence column): give one for results that are the same on every run.
TTL (`ttl`) runs on processing time: an event first drops what expired at the batch's time, and a key whose
whole history expired is dropped by a processing-time timeout. Spark then keeps asking for no-data batches, so
`Trigger.AvailableNow` only terminates with `spark.sql.streaming.noDataMicroBatches.enabled=false`.
"""
from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any, Sequence

from catalog import parse_duration
from logstore import ROW_KIND_COLUMN
from tablestore.errors import TableStoreError
from tablestore.materializer.options import MaterializeOptions
from tablestore.spark.jar import MAIN_CLASS, SparkJarError
from tablestore.spark.pyworker import freeze_imports

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BACKEND_TYPE = "spark-rocksdb"  # validates the options as for a RocksDB backend (the FLIP's ADAPTIVE defaults 50/40)


def _ttl_ms(ttl: int | str | dt.timedelta | None) -> int | None:
    if ttl is None:
        return None
    if isinstance(ttl, dt.timedelta):
        return int(ttl.total_seconds() * 1000)
    if isinstance(ttl, str):
        return parse_duration(ttl)
    return int(ttl)


def upsert_materialize(
    df: "DataFrame",
    primary_key: Sequence[str],
    upsert_key: Sequence[str] | None = None,
    strategy: str = "ADAPTIVE",
    ttl: int | str | dt.timedelta | None = None,
    *,
    threshold_high: int | None = None,
    threshold_low: int | None = None,
    order_by: str | None = None,
    output_mode: str = "append",
) -> "DataFrame":
    """Reconcile a streaming changelog (a `_row_kind` column with +I/-U/+U/-D) per primary key, in the job.

    Returns a streaming DataFrame with the same columns; `_row_kind` as the materializer emits it. `ttl` is in
    milliseconds, a timedelta or a duration string ("1 h"). `order_by` names a column whose order is the
    arrival order of a key's events within a micro-batch (it stays in the output). `output_mode` is the
    output mode the query writes with: "append" (Spark's default) or "update".
    """
    from pyspark.sql.types import StringType

    columns = list(df.columns)
    if ROW_KIND_COLUMN not in columns:
        raise TableStoreError(f"upsert_materialize needs a {ROW_KIND_COLUMN!r} column; columns: {columns}")
    kind_type = df.schema[ROW_KIND_COLUMN].dataType
    if not isinstance(kind_type, StringType):
        raise TableStoreError(f"upsert_materialize: {ROW_KIND_COLUMN!r} must be a string column, not {kind_type}")
    if order_by is not None and order_by not in columns:
        raise TableStoreError(f"upsert_materialize: order_by column {order_by!r} is not in the DataFrame {columns}")
    row_columns = [c for c in columns if c not in (ROW_KIND_COLUMN, order_by)]
    missing = [c for c in [*primary_key, *(upsert_key or [])] if c not in row_columns]
    if missing:
        raise TableStoreError(f"upsert_materialize: key columns {missing} are not row columns {row_columns}")
    if output_mode not in ("append", "update"):
        raise TableStoreError(f"upsert_materialize: output_mode must be 'append' or 'update', not {output_mode!r}")
    options = MaterializeOptions.resolve(strategy.upper(), threshold_high=threshold_high,  # type: ignore[arg-type]
                                         threshold_low=threshold_low, ttl_ms=_ttl_ms(ttl),
                                         backend_type=BACKEND_TYPE)
    spark = df.sparkSession
    operator = _jvm_class(spark)
    gateway = spark.sparkContext._gateway
    jdf = operator.apply(df._jdf, _java_strings(gateway, primary_key), _java_strings(gateway, upsert_key or []),
                         ROW_KIND_COLUMN, order_by, options.strategy == "LEGACY", options.ttl_ms or 0,
                         output_mode == "update")
    from pyspark.sql import DataFrame

    return DataFrame(jdf, spark)


def _jvm_class(spark: object) -> Any:
    from py4j.java_gateway import JavaClass

    jvm = getattr(spark, "_jvm", None)
    if jvm is None:
        raise SparkJarError("upsert_materialize needs a classic (JVM) SparkSession, not Spark Connect")
    cls = jvm
    for part in MAIN_CLASS.split("."):
        cls = getattr(cls, part)
    if not isinstance(cls, JavaClass):
        raise SparkJarError(f"{MAIN_CLASS} is not on this SparkSession's classpath: start the session with "
                            "tablestore.spark.local_session(), or set spark.jars to tablestore.spark.jar_path()")
    return cls


def _java_strings(gateway: object, values: Sequence[str]) -> object:
    array = gateway.new_array(gateway.jvm.java.lang.String, len(values))  # type: ignore[attr-defined]
    for i, value in enumerate(values):
        array[i] = value
    return array


freeze_imports()   # a PySpark worker's collections after each task skip what is loaded by now (pyworker)
