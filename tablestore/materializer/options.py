"""Options of the upsert materializer. Declared once (key, type, default, description) with every table option
in ``catalog.options``; the library parses them here, once, into a frozen :class:`MaterializeOptions`. Keys follow Flink's ``table.exec.sink.upsert-materialize*`` options without the
``table.exec.sink.`` prefix.

Invariants
* ``threshold_high > threshold_low >= 0`` (Flink: ``checkArgument(high > low)``).
* Unset ADAPTIVE thresholds take the FLIP's backend-specific defaults: heap-like backends (``"heap"``,
  ``"hashmap"``, and the in-memory backend) 400 / 300, every other backend (RocksDB, Spark's state store) 50 / 40.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Mapping

from catalog import (
    UPSERT_MATERIALIZE_STRATEGY,
    UPSERT_MATERIALIZE_THRESHOLD_HIGH,
    UPSERT_MATERIALIZE_THRESHOLD_LOW,
    UPSERT_MATERIALIZE_TTL,
    parse_duration,
)
from tablestore.materializer.errors import InvalidOptionError

Strategy = Literal["LEGACY", "VALUE", "MAP", "ADAPTIVE"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("LEGACY", "VALUE", "MAP", "ADAPTIVE")

# declared once, with the table options, in catalog.options (key, type, default, doc)
STRATEGY_KEY: Final = UPSERT_MATERIALIZE_STRATEGY.key
THRESHOLD_HIGH_KEY: Final = UPSERT_MATERIALIZE_THRESHOLD_HIGH.key
THRESHOLD_LOW_KEY: Final = UPSERT_MATERIALIZE_THRESHOLD_LOW.key
TTL_KEY: Final = UPSERT_MATERIALIZE_TTL.key
OPTIONS: Final = (UPSERT_MATERIALIZE_STRATEGY, UPSERT_MATERIALIZE_THRESHOLD_HIGH, UPSERT_MATERIALIZE_THRESHOLD_LOW,
                  UPSERT_MATERIALIZE_TTL)

HEAP_BACKENDS: Final = frozenset({"heap", "hashmap", "memory"})
HEAP_THRESHOLDS: Final = (400, 300)
OTHER_THRESHOLDS: Final = (50, 40)


def default_thresholds(backend_type: str) -> tuple[int, int]:
    """The FLIP's ``(high, low)`` defaults for a backend type identifier (trimmed, case-insensitive)."""
    return HEAP_THRESHOLDS if backend_type.strip().lower() in HEAP_BACKENDS else OTHER_THRESHOLDS


@dataclass(frozen=True)
class MaterializeOptions:
    """Parsed, validated materializer options (thresholds already resolved for a backend)."""

    strategy: Strategy = "LEGACY"
    threshold_high: int = HEAP_THRESHOLDS[0]
    threshold_low: int = HEAP_THRESHOLDS[1]
    ttl_ms: int | None = None

    @staticmethod
    def resolve(strategy: str = "LEGACY", *, threshold_high: int | None = None, threshold_low: int | None = None,
                ttl_ms: int | None = None, backend_type: str = "heap") -> MaterializeOptions:
        """Validate explicit values, fill unset thresholds from the backend's defaults."""
        if strategy not in STRATEGIES:
            raise InvalidOptionError(STRATEGY_KEY, strategy, f"expected one of {', '.join(STRATEGIES)}")
        high_default, low_default = default_thresholds(backend_type)
        high = _as_int(THRESHOLD_HIGH_KEY, threshold_high, high_default)
        low = _as_int(THRESHOLD_LOW_KEY, threshold_low, low_default)
        if low < 0 or high <= low:
            raise InvalidOptionError(THRESHOLD_HIGH_KEY, (high, low), "need threshold.high > threshold.low >= 0")
        ttl = _as_int(TTL_KEY, ttl_ms, 0) if ttl_ms is not None else 0
        return MaterializeOptions(strategy, high, low, ttl if ttl > 0 else None)

    @staticmethod
    def from_properties(props: Mapping[str, str], *, backend_type: str = "heap") -> MaterializeOptions:
        """Parse the string-valued table properties named by the keys above (other keys are ignored)."""
        def opt_int(key: str) -> int | None:
            raw = props.get(key)
            if raw is None or raw.strip() == "":
                return None
            return _as_int(key, raw.strip(), 0)

        raw_ttl = props.get(TTL_KEY)
        ttl_ms = None
        if raw_ttl is not None and raw_ttl.strip():
            try:
                ttl_ms = parse_duration(raw_ttl)
            except ValueError as e:
                raise InvalidOptionError(TTL_KEY, raw_ttl, str(e)) from None
        return MaterializeOptions.resolve(
            props.get(STRATEGY_KEY, UPSERT_MATERIALIZE_STRATEGY.default or "LEGACY").strip().upper(),
            threshold_high=opt_int(THRESHOLD_HIGH_KEY), threshold_low=opt_int(THRESHOLD_LOW_KEY),
            ttl_ms=ttl_ms, backend_type=backend_type)


def _as_int(key: str, value: object, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        raise InvalidOptionError(key, value, "expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            raise InvalidOptionError(key, value, "expected an integer") from None
    raise InvalidOptionError(key, value, "expected an integer")
