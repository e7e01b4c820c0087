"""Options of the upsert materializer, declared once (key, type, default, description).

The catalog registers these keys as table options later; the library parses them here, once, into a frozen
:class:`MaterializeOptions`. Keys follow Flink's ``table.exec.sink.upsert-materialize*`` options without the
``table.exec.sink.`` prefix.

Invariants
* ``threshold_high > threshold_low >= 0`` (Flink: ``checkArgument(high > low)``).
* Unset ADAPTIVE thresholds take the FLIP's backend-specific defaults: heap-like backends (``"heap"``,
  ``"hashmap"``, and the in-memory backend) 400 / 300, every other backend (RocksDB, Spark's state store) 50 / 40.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, Mapping

from tablestore.materializer.errors import InvalidOptionError

Strategy = Literal["LEGACY", "VALUE", "MAP", "ADAPTIVE"]
STRATEGIES: Final[tuple[Strategy, ...]] = ("LEGACY", "VALUE", "MAP", "ADAPTIVE")

STRATEGY_KEY: Final = "upsert-materialize.strategy"
THRESHOLD_HIGH_KEY: Final = "upsert-materialize.adaptive.threshold.high"
THRESHOLD_LOW_KEY: Final = "upsert-materialize.adaptive.threshold.low"
TTL_KEY: Final = "upsert-materialize.ttl"


@dataclass(frozen=True)
class OptionSpec:
    """One declared option: its key, value type, default (``None`` = unset) and documentation."""

    key: str
    type: str
    default: str | None
    description: str


OPTIONS: Final[tuple[OptionSpec, ...]] = (
    OptionSpec(STRATEGY_KEY, "enum", "LEGACY",
               "How the materializer keeps each primary key's history: LEGACY (one list, per-key TTL), VALUE "
               "(one list, state-compatible with MAP), MAP (ordered multiset, O(1) per event) or ADAPTIVE "
               "(VALUE until threshold.high entries, MAP until back at threshold.low)."),
    OptionSpec(THRESHOLD_HIGH_KEY, "long", None,
               "ADAPTIVE: history size at which a key switches from VALUE to MAP. Unset: 400 on heap-like "
               "backends, 50 otherwise."),
    OptionSpec(THRESHOLD_LOW_KEY, "long", None,
               "ADAPTIVE: history size at which a key switches back from MAP to VALUE. Unset: 300 on heap-like "
               "backends, 40 otherwise."),
    OptionSpec(TTL_KEY, "duration-ms", None,
               "Time to live of history entries in milliseconds; unset or <= 0 disables expiry. LEGACY expires a "
               "key's whole history TTL after its last write; the other strategies expire single entries from "
               "the front of the history."),
)

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

        return MaterializeOptions.resolve(
            props.get(STRATEGY_KEY, "LEGACY").strip().upper(),
            threshold_high=opt_int(THRESHOLD_HIGH_KEY), threshold_low=opt_int(THRESHOLD_LOW_KEY),
            ttl_ms=opt_int(TTL_KEY), backend_type=backend_type)


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
