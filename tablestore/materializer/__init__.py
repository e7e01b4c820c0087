"""Changelog reconciliation per key: the upsert materializer (Flink's SinkUpsertMaterializer, LEGACY / VALUE /
MAP / ADAPTIVE) and the changelog normalizer (Flink's ChangelogNormalize). Pure library: no Spark needed.
See ``docs/materializer.md``."""
from tablestore.materializer.backend import InMemoryStateBackend, MapState, StateBackend, ValueState
from tablestore.materializer.changes import ROW_KIND_COLUMN
from tablestore.materializer.errors import (
    CorruptStateError,
    InvalidOptionError,
    InvalidRowKindError,
    MaterializerError,
    RowShapeError,
)
from tablestore.materializer.normalize import ChangelogNormalizer
from tablestore.materializer.options import (
    STRATEGY_KEY,
    THRESHOLD_HIGH_KEY,
    THRESHOLD_LOW_KEY,
    TTL_KEY,
    MaterializeOptions,
    Strategy,
)
from tablestore.materializer.upsert import UpsertMaterializer

__all__ = [
    "ChangelogNormalizer",
    "CorruptStateError",
    "InMemoryStateBackend",
    "InvalidOptionError",
    "InvalidRowKindError",
    "MapState",
    "MaterializeOptions",
    "MaterializerError",
    "ROW_KIND_COLUMN",
    "RowShapeError",
    "STRATEGY_KEY",
    "StateBackend",
    "Strategy",
    "THRESHOLD_HIGH_KEY",
    "THRESHOLD_LOW_KEY",
    "TTL_KEY",
    "UpsertMaterializer",
    "ValueState",
]
