"""The state-backend seam: keyed value state and keyed map state, plus the in-memory backend.

The history algorithms (``multiset.py``, ``linked.py``) touch state only through :class:`ValueState` and
:class:`MapState`; every call names the (primary) key it is about, as bytes from the key codec. The same
algorithms therefore run over this module's in-memory backend (tests, benchmarks) and over a Spark state
store.

Contract (every backend)
* A value handed to ``put`` is owned by the backend afterwards; a value returned by ``get`` may be mutated by
  the caller, but the change is only guaranteed to persist after ``put`` of that value. Algorithms must
  ``put`` every value they change (``InMemoryStateBackend(serialize=True)`` copies on every call and so
  catches a forgotten ``put``).
* Values are plain picklable Python structures (lists, tuples, ints, bytes, row tuples).
* ``type_identifier`` names the backend kind; it picks the ADAPTIVE defaults (``options.default_thresholds``).

Few state calls per micro-batch: :meth:`InMemoryStateBackend.export_key` / :meth:`import_key` move everything
stored under one key, across all states, as ONE bytes blob. A Spark operator loads a key's blob into an
in-memory backend once per micro-batch, runs all of that key's events against it, and stores the blob back once.
Blob layout (on-disk once checkpointed): ``b"\\x01"`` (layout version) + pickle (protocol 5) of
``{"v": {state: value}, "m": {state: {user_key: value}}}``.
"""
from __future__ import annotations

import pickle
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterator
from typing import Any

from tablestore.materializer.errors import CorruptStateError

_BLOB_VERSION = b"\x01"


class ValueState(ABC):
    """One value per key."""

    @abstractmethod
    def get(self, key: bytes) -> Any:
        """The value stored under ``key``, or ``None``."""

    @abstractmethod
    def put(self, key: bytes, value: Any) -> None:
        """Store ``value`` under ``key`` (replacing any previous value)."""

    @abstractmethod
    def remove(self, key: bytes) -> None:
        """Forget ``key`` (no-op when absent)."""

    @abstractmethod
    def keys(self) -> Iterator[bytes]:
        """Every key holding a value (for periodic cleanup); the caller must not modify the state meanwhile."""


class MapState(ABC):
    """A map per key, from user keys to values."""

    @abstractmethod
    def get(self, key: bytes, user_key: Hashable) -> Any:
        """The value under ``user_key`` in ``key``'s map, or ``None``."""

    @abstractmethod
    def put(self, key: bytes, user_key: Hashable, value: Any) -> None:
        """Store ``value`` under ``user_key`` in ``key``'s map."""

    @abstractmethod
    def remove(self, key: bytes, user_key: Hashable) -> None:
        """Remove ``user_key`` from ``key``'s map (no-op when absent)."""

    @abstractmethod
    def items(self, key: bytes) -> list[tuple[Hashable, Any]]:
        """All entries of ``key``'s map, in no particular order."""

    @abstractmethod
    def clear(self, key: bytes) -> None:
        """Drop ``key``'s whole map."""


class StateBackend(ABC):
    """Creates named keyed states. ``type_identifier`` is e.g. ``"heap"`` or ``"rocksdb"``."""

    type_identifier: str

    @abstractmethod
    def value_state(self, name: str) -> ValueState:
        """The value state called ``name`` (created on first use; the same object on every call)."""

    @abstractmethod
    def map_state(self, name: str) -> MapState:
        """The map state called ``name`` (created on first use; the same object on every call)."""


class _MemValue(ValueState):
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: dict[bytes, Any] = {}

    def get(self, key: bytes) -> Any:
        return self.data.get(key)

    def put(self, key: bytes, value: Any) -> None:
        self.data[key] = value

    def remove(self, key: bytes) -> None:
        self.data.pop(key, None)

    def keys(self) -> Iterator[bytes]:
        return iter(list(self.data))


class _MemMap(MapState):
    __slots__ = ("data",)

    def __init__(self) -> None:
        self.data: dict[bytes, dict[Hashable, Any]] = {}

    def get(self, key: bytes, user_key: Hashable) -> Any:
        m = self.data.get(key)
        return None if m is None else m.get(user_key)

    def put(self, key: bytes, user_key: Hashable, value: Any) -> None:
        m = self.data.get(key)
        if m is None:
            self.data[key] = {user_key: value}
        else:
            m[user_key] = value

    def remove(self, key: bytes, user_key: Hashable) -> None:
        m = self.data.get(key)
        if m is not None:
            m.pop(user_key, None)
            if not m:
                del self.data[key]

    def items(self, key: bytes) -> list[tuple[Hashable, Any]]:
        m = self.data.get(key)
        return [] if m is None else list(m.items())

    def clear(self, key: bytes) -> None:
        self.data.pop(key, None)


def _copy(value: Any) -> Any:
    return None if value is None else pickle.loads(pickle.dumps(value, protocol=5))


class _CopyingValue(_MemValue):
    """Stores a serialized copy: every get/put (de)serializes, like a RocksDB-backed state."""

    def get(self, key: bytes) -> Any:
        return _copy(self.data.get(key))

    def put(self, key: bytes, value: Any) -> None:
        self.data[key] = _copy(value)


class _CopyingMap(_MemMap):
    def get(self, key: bytes, user_key: Hashable) -> Any:
        return _copy(super().get(key, user_key))

    def put(self, key: bytes, user_key: Hashable, value: Any) -> None:
        super().put(key, user_key, _copy(value))

    def items(self, key: bytes) -> list[tuple[Hashable, Any]]:
        return [(k, _copy(v)) for k, v in super().items(key)]


class InMemoryStateBackend(StateBackend):
    """Dict-backed states. ``serialize=True`` copies values through pickle on every call (tests use it to prove
    the algorithms ``put`` everything they change)."""

    def __init__(self, *, serialize: bool = False, type_identifier: str = "heap") -> None:
        self.type_identifier = type_identifier
        self._serialize = serialize
        self._values: dict[str, _MemValue] = {}
        self._maps: dict[str, _MemMap] = {}

    def value_state(self, name: str) -> ValueState:
        state = self._values.get(name)
        if state is None:
            state = self._values[name] = _CopyingValue() if self._serialize else _MemValue()
        return state

    def map_state(self, name: str) -> MapState:
        state = self._maps.get(name)
        if state is None:
            state = self._maps[name] = _CopyingMap() if self._serialize else _MemMap()
        return state

    def keys(self) -> list[bytes]:
        """Every key holding any state, sorted (bytewise = key order under the order-preserving codec)."""
        found: set[bytes] = set()
        for v in self._values.values():
            found.update(v.data)
        for m in self._maps.values():
            found.update(m.data)
        return sorted(found)

    def export_key(self, key: bytes) -> bytes | None:
        """Everything stored under ``key`` as one blob (``None`` when the key holds no state)."""
        values = {n: s.data[key] for n, s in self._values.items() if key in s.data}
        maps = {n: dict(s.data[key]) for n, s in self._maps.items() if key in s.data}
        if not values and not maps:
            return None
        return _BLOB_VERSION + pickle.dumps({"v": values, "m": maps}, protocol=5)

    def import_key(self, key: bytes, blob: bytes | None) -> None:
        """Replace everything stored under ``key`` by the content of an :meth:`export_key` blob."""
        for vs in self._values.values():
            vs.data.pop(key, None)
        for ms in self._maps.values():
            ms.data.pop(key, None)
        if blob is None:
            return
        if blob[:1] != _BLOB_VERSION:
            raise CorruptStateError(key, f"unknown state blob layout version {blob[:1]!r}")
        try:
            content = pickle.loads(blob[1:])
        except Exception as exc:  # any unpickling failure means the blob is damaged
            raise CorruptStateError(key, f"cannot decode state blob: {exc}") from exc
        for name, value in content["v"].items():
            self.value_state(name)
            self._values[name].data[key] = value
        for name, entries in content["m"].items():
            self.map_state(name)
            self._maps[name].data[key] = dict(entries)
