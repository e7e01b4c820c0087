"""Option declarations: key, type, default and doc, declared once. Values arrive as strings (SQL WITH clauses,
session settings) and are parsed here, once, into typed values."""
from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable, Generic, Literal, TypeVar

from catalog.errors import InvalidOptionError
from catalog.secrets import redact_value, scrub

T = TypeVar("T")

OptionType = Literal["int", "string", "boolean", "memory", "duration", "enum", "map"]

_MEMORY_UNITS = {"": 1, "b": 1, "kb": 1 << 10, "k": 1 << 10, "mb": 1 << 20, "m": 1 << 20, "gb": 1 << 30, "g": 1 << 30}
_DURATION_UNITS = {
    "ms": 1, "millis": 1, "s": 1000, "sec": 1000, "min": 60_000, "m": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000, "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}


def parse_memory(text: str) -> int:
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _MEMORY_UNITS:
        raise ValueError(f"{text!r} is not a memory size (e.g. '64 mb', '1 gb', '4096')")
    return int(m.group(1)) * _MEMORY_UNITS[m.group(2).lower()]


def parse_duration(text: str) -> int:
    """Milliseconds of a duration like '1 h', '30 min', '10 s', '500 ms' (a bare number is milliseconds)."""
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if not m or (unit not in _DURATION_UNITS and unit != ""):
        raise ValueError(f"{text!r} is not a duration (e.g. '500 ms', '10 s', '30 min', '1 h', '7 d')")
    return int(m.group(1)) * (_DURATION_UNITS[unit] if unit else 1)


def parse_bool(text: str) -> bool:
    if text.strip().lower() in ("true", "1", "yes"):
        return True
    if text.strip().lower() in ("false", "0", "no"):
        return False
    raise ValueError(f"{text!r} is not a boolean (true/false)")


_NUMERIC = ("int", "memory", "duration")

_PARSERS: dict[str, Callable[[str], object]] = {
    "int": int,
    "string": str,
    "boolean": parse_bool,
    "memory": parse_memory,
    "duration": parse_duration,
    "enum": str,
}


@dataclass(frozen=True)
class ConfigOption(Generic[T]):
    """One option. For type "map" the key is a prefix: `<key>.<name>` sets entry <name> (e.g. Kafka properties)."""

    key: str
    type: OptionType
    default: str | None
    description: str
    choices: tuple[str, ...] = ()
    min: int | None = None
    """Smallest valid value of a numeric option (int, memory in bytes, duration in ms); None: unbounded."""
    max: int | None = None
    """Largest valid value of a numeric option; None: unbounded."""

    def __post_init__(self) -> None:
        if (self.min is not None or self.max is not None) and self.type not in _NUMERIC:
            raise TypeError(f"option {self.key!r}: a range needs a numeric type, not {self.type}")

    @property
    def valid_range(self) -> str:
        """The range as the docs and errors show it, e.g. '>= 1', '0 .. 100', or '' when unbounded."""
        unit = {"memory": " bytes", "duration": " ms"}.get(self.type, "")
        if self.min is not None and self.max is not None:
            return f"{self.min} .. {self.max}{unit}"
        if self.min is not None:
            return f">= {self.min}{unit}"
        if self.max is not None:
            return f"<= {self.max}{unit}"
        return ""

    def parse(self, value: str) -> T:
        try:
            parsed = _PARSERS[self.type](value)
        except (ValueError, KeyError) as e:
            raise InvalidOptionError(f"option {self.key!r}: {scrub(str(e), {self.key: value})}") from None
        if self.choices and parsed not in self.choices:
            close = difflib.get_close_matches(str(parsed), self.choices, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise InvalidOptionError(f"option {self.key!r}: {redact_value(self.key, value)!r} is not one of "
                                     f"{', '.join(self.choices)}{hint}")
        if isinstance(parsed, int) and not isinstance(parsed, bool) and (
            (self.min is not None and parsed < self.min) or (self.max is not None and parsed > self.max)
        ):
            raise InvalidOptionError(f"option {self.key!r}: {redact_value(self.key, value)!r} is out of range; "
                                     f"valid: {self.valid_range}")
        return parsed  # type: ignore[return-value]

    def matches(self, key: str) -> bool:
        return key == self.key or (self.type == "map" and key.startswith(self.key + "."))
