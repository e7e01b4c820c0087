"""The upsert materializer inside a Spark job: `groupBy(primary key).transformWithState` (the Row API) over
the library's algorithm (tablestore.materializer), its state in Spark's RocksDB state store and checkpoints.

State layout, chosen for few state calls (each is an RPC to the JVM): ONE ValueState per primary key holding the
key's whole history as one blob (`InMemoryStateBackend.export_key`). Per key and micro-batch: one `get`, every
event of the batch run in memory, one `update` (or `clear` when the history emptied). So the cost is per key per
micro-batch, not per event.

Order: within a micro-batch the events of a key are processed in the order Spark delivers them, or sorted by
`order_by` when given (an arrival sequence column): give one for results that are the same on every run.
TTL (`ttl`) needs processing time: the query then runs with timeMode ProcessingTime, and, as Spark's
transformWithState always asks for another batch in that mode, `Trigger.AvailableNow` only terminates with
`spark.sql.streaming.noDataMicroBatches.enabled=false`.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from catalog.optiontypes import parse_duration
from logstore.changes import ROW_KIND_COLUMN
from tablestore.errors import TableStoreError
from tablestore.materializer import UpsertMaterializer
from tablestore.materializer.backend import InMemoryStateBackend
from tablestore.spark.types import to_arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

STATE_NAME = "upsert-materialize-history"
BACKEND_TYPE = "spark-rocksdb"  # not heap-like: ADAPTIVE defaults to the FLIP's RocksDB thresholds (50/40)


@dataclass(frozen=True)
class MaterializeSpec:
    """Everything a Spark worker needs to rebuild the operator (plain values: it pickles)."""

    columns: tuple[str, ...]          # the DataFrame's columns (output = input columns)
    row_positions: tuple[int, ...]    # input positions of the materializer's row: all but _row_kind and order_by
    kind_index: int                   # input position of _row_kind
    primary_key: tuple[int, ...]      # positions in the row tuple
    upsert_key: tuple[int, ...] | None
    strategy: str
    ttl_ms: int | None
    threshold_high: int | None
    threshold_low: int | None
    arrow_schema: bytes               # serialized Arrow schema of the row columns (row types for the key codec)
    order_index: int | None           # input position of the order_by column, if any

    def output_plan(self) -> tuple[int, ...]:
        """Per output column: -1 the emitted kind, -2 the triggering event's order value, i >= 0 row field i."""
        plan = []
        for pos in range(len(self.columns)):
            if pos == self.kind_index:
                plan.append(-1)
            elif pos == self.order_index:
                plan.append(-2)
            else:
                plan.append(self.row_positions.index(pos))
        return tuple(plan)


def _processor_class() -> type:
    from pyspark.sql import Row
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import BinaryType, StructField, StructType

    class UpsertMaterializeProcessor(StatefulProcessor):  # type: ignore[misc]
        def __init__(self, spec: MaterializeSpec) -> None:
            self.spec = spec

        def init(self, handle: Any) -> None:
            import pyarrow as pa

            spec = self.spec
            self._out = Row(*spec.columns)
            self._plan = spec.output_plan()
            self._state = handle.getValueState(STATE_NAME, StructType([StructField("blob", BinaryType(), False)]))
            self._backend = InMemoryStateBackend(type_identifier=BACKEND_TYPE)
            row_types = [f.type for f in pa.ipc.read_schema(pa.py_buffer(spec.arrow_schema))]
            self._m = UpsertMaterializer(
                list(spec.primary_key), list(spec.upsert_key) if spec.upsert_key else None, spec.strategy,  # type: ignore[arg-type]
                spec.ttl_ms, spec.threshold_high, spec.threshold_low, row_types=row_types, backend=self._backend,
            )

        def handleInputRows(self, key: tuple[Any, ...], rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
            spec, m, backend = self.spec, self._m, self._backend
            skey = m.state_key(key)
            stored = self._state.get()  # None when absent: one RPC, not exists() + get()
            backend.import_key(skey, None if stored is None else bytes(stored[0]))
            now = timerValues.getCurrentProcessingTimeInMs() if spec.ttl_ms is not None else None
            events = list(rows)
            if spec.order_index is not None:
                events.sort(key=lambda r: r[spec.order_index])
            k, o, positions, plan = spec.kind_index, spec.order_index, spec.row_positions, self._plan
            process, out = m.process, self._out
            for r in events:
                values = tuple(r)
                order = values[o] if o is not None else None
                for out_kind, out_row in process(values[k], tuple(values[p] for p in positions), now):
                    yield out(*[out_kind if i == -1 else order if i == -2 else out_row[i] for i in plan])
            blob = backend.export_key(skey)
            if blob is not None:
                self._state.update((blob,))
            elif stored is not None:
                self._state.clear()
            backend.import_key(skey, None)  # keep the worker's memory to one key at a time

        def close(self) -> None:
            pass

    return UpsertMaterializeProcessor


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
) -> "DataFrame":
    """Reconcile a streaming changelog (a `_row_kind` column with +I/-U/+U/-D) per primary key, in the job.

    Returns a streaming DataFrame with the same columns; `_row_kind` as the materializer emits it. `ttl` is in
    milliseconds, a timedelta or a duration string ("1 h"). `order_by` names a column whose order is the
    arrival order of a key's events within a micro-batch (it stays in the output).
    """
    import pyarrow as pa

    columns = list(df.columns)
    if ROW_KIND_COLUMN not in columns:
        raise TableStoreError(f"upsert_materialize needs a {ROW_KIND_COLUMN!r} column; columns: {columns}")
    if order_by is not None and order_by not in columns:
        raise TableStoreError(f"upsert_materialize: order_by column {order_by!r} is not in the DataFrame {columns}")
    row_columns = [c for c in columns if c not in (ROW_KIND_COLUMN, order_by)]
    missing = [c for c in [*primary_key, *(upsert_key or [])] if c not in row_columns]
    if missing:
        raise TableStoreError(f"upsert_materialize: key columns {missing} are not row columns {row_columns}")
    row_schema = to_arrow_schema(df.select(*row_columns).schema)
    spec = MaterializeSpec(
        columns=tuple(columns),
        row_positions=tuple(columns.index(c) for c in row_columns),
        kind_index=columns.index(ROW_KIND_COLUMN),
        primary_key=tuple(row_columns.index(c) for c in primary_key),
        upsert_key=tuple(row_columns.index(c) for c in upsert_key) if upsert_key else None,
        strategy=strategy.upper(),
        ttl_ms=_ttl_ms(ttl),
        threshold_high=threshold_high,
        threshold_low=threshold_low,
        arrow_schema=pa.schema(row_schema).serialize().to_pybytes(),
        order_index=columns.index(order_by) if order_by else None,
    )
    UpsertMaterializer([0], strategy=spec.strategy, ttl_ms=spec.ttl_ms,  # type: ignore[arg-type]
                       threshold_high=threshold_high, threshold_low=threshold_low)  # validate options on the driver
    processor = _processor_class()(spec)
    return df.groupBy(*primary_key).transformWithState(
        processor,
        outputStructType=df.schema,
        outputMode="Append",
        timeMode="ProcessingTime" if spec.ttl_ms is not None else "None",
    )
