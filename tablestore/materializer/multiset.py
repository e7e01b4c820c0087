"""Sequenced multisets: the per-primary-key history of added rows, in insertion order.

This is Flink's ``SequencedMultiSetState`` contract, over the state seam of ``backend.py``. Every element is
``(row, ident, ts)``: the row tuple, its identity bytes (the key codec's encoding of the upsert-key projection,
or of the whole row when there is no upsert key) and its write time in ms.

Contract (all implementations give the same observable results)
* ``add``: set semantics; an element with the same ident is replaced in place (row and ts), else appended.
* ``append``: multiset semantics; always appended.
* ``remove``: removes the FIRST (oldest) element with the given ident and reports a :class:`StateChange`:
  ``REMOVAL_NOT_FOUND`` (nothing matched), ``REMOVAL_ALL`` (history now empty; payload = the row passed in),
  ``REMOVAL_LAST_ADDED`` (the newest element was removed; payload = the element now newest),
  ``REMOVAL_OTHER`` (an older element was removed; no payload).
* ``expire(key, cutoff)`` drops elements with ``ts <= cutoff`` from the FRONT of the history and stops at the
  first element that is still alive, so an element never leaves before its time; one that was overtaken by a
  refreshed older element (``add`` refreshes ts in place) leaves once everything before it has expired.
  LEGACY instead expires a key's whole history when its last write is ``<= cutoff`` (Flink's per-key TTL).
* Every structure of a key is removed when its history becomes empty.

Implementations: :class:`ListMultiSet` (LEGACY and VALUE: one list per key, O(n) per retraction),
``linked.LinkedMultiSet`` (MAP: O(1) state calls per event) and :class:`AdaptiveMultiSet` (VALUE below
``threshold.high`` elements, MAP until back at ``threshold.low``).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from enum import IntEnum
from typing import Any, NamedTuple

from tablestore.materializer.backend import StateBackend
from tablestore.materializer.errors import InvalidOptionError
from tablestore.materializer.options import THRESHOLD_HIGH_KEY

Row = tuple[Any, ...]


class ChangeType(IntEnum):
    ADDITION = 0
    REMOVAL_NOT_FOUND = 1
    REMOVAL_ALL = 2
    REMOVAL_LAST_ADDED = 3
    REMOVAL_OTHER = 4


ADDITION = ChangeType.ADDITION
REMOVAL_NOT_FOUND = ChangeType.REMOVAL_NOT_FOUND
REMOVAL_ALL = ChangeType.REMOVAL_ALL
REMOVAL_LAST_ADDED = ChangeType.REMOVAL_LAST_ADDED
REMOVAL_OTHER = ChangeType.REMOVAL_OTHER


class StateChange(NamedTuple):
    """What one operation did to a key's history."""

    type: ChangeType
    size_before: int
    size_after: int
    payload: Row | None = None


_new = tuple.__new__


def change(ctype: ChangeType, size_before: int, size_after: int, payload: Row | None = None) -> StateChange:
    """A :class:`StateChange` built without NamedTuple's Python-level ``__new__`` (hot path)."""
    return _new(StateChange, (ctype, size_before, size_after, payload))


class Entry(NamedTuple):
    row: Row
    ident: bytes
    ts: int


class SequencedMultiSet(ABC):
    """Per-key ordered multiset over a state backend (see the module docstring for the contract)."""

    @abstractmethod
    def add(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange: ...

    @abstractmethod
    def append(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange: ...

    @abstractmethod
    def remove(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        """Remove the oldest element with ``ident``; ``ts`` is the time of this operation."""

    @abstractmethod
    def expire(self, key: bytes, cutoff: int) -> int:
        """Drop expired elements (see module docstring); returns how many were dropped."""

    @abstractmethod
    def entries(self, key: bytes) -> list[Entry]:
        """The history in insertion order."""

    @abstractmethod
    def size(self, key: bytes) -> int: ...

    def is_empty(self, key: bytes) -> bool:
        return self.size(key) == 0

    @abstractmethod
    def clear(self, key: bytes) -> None: ...

    @abstractmethod
    def load(self, key: bytes, entries: list[Entry]) -> None:
        """Replace the (empty) history of ``key`` by ``entries`` in one go (used by ADAPTIVE migrations)."""

    @abstractmethod
    def keys(self) -> Iterator[bytes]:
        """Every key that has a non-empty history."""


# ListMultiSet state layout (one value per key; on-disk once checkpointed):
#   [rows: list[Row], idents: list[bytes], timestamps: list[int], written_ms: int]
_ROWS, _IDENTS, _TSS, _WRITTEN = 0, 1, 2, 3


class ListMultiSet(SequencedMultiSet):
    """LEGACY / VALUE: the whole history as one value per key; retraction scans for the ident (O(n)).

    ``key_ttl=True`` is LEGACY: expiry looks at the key's last write time only, and every write (add, or a
    retraction that found its row) refreshes it, like Flink's per-key state TTL (``OnCreateAndWrite``).
    """

    def __init__(self, backend: StateBackend, name: str = "list", *, key_ttl: bool = False) -> None:
        self._state = backend.value_state(name)
        self._key_ttl = key_ttl

    def read(self, key: bytes) -> Any:
        """The key's stored list (``None`` when empty), to hand to the ``*_to`` / ``*_from`` methods."""
        return self._state.get(key)

    def add(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        return self.add_to(key, self._state.get(key), row, ident, ts)

    def append(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        return self.append_to(key, self._state.get(key), row, ident, ts)

    def remove(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        return self.remove_from(key, self._state.get(key), row, ident, ts)

    def add_to(self, key: bytes, st: Any, row: Row, ident: bytes, ts: int) -> StateChange:
        """``add`` on a list already read with :meth:`read` (one state read per event for ADAPTIVE)."""
        if st is None:
            self._state.put(key, [[row], [ident], [ts], ts])
            return change(ADDITION, 0, 1)
        idents = st[_IDENTS]
        n = len(idents)
        try:
            i = idents.index(ident)
        except ValueError:
            st[_ROWS].append(row)
            idents.append(ident)
            st[_TSS].append(ts)
            st[_WRITTEN] = ts
            self._state.put(key, st)
            return change(ADDITION, n, n + 1)
        st[_ROWS][i] = row
        st[_TSS][i] = ts
        st[_WRITTEN] = ts
        self._state.put(key, st)
        return change(ADDITION, n, n)

    def append_to(self, key: bytes, st: Any, row: Row, ident: bytes, ts: int) -> StateChange:
        if st is None:
            self._state.put(key, [[row], [ident], [ts], ts])
            return change(ADDITION, 0, 1)
        rows = st[_ROWS]
        n = len(rows)
        rows.append(row)
        st[_IDENTS].append(ident)
        st[_TSS].append(ts)
        st[_WRITTEN] = ts
        self._state.put(key, st)
        return change(ADDITION, n, n + 1)

    def remove_from(self, key: bytes, st: Any, row: Row, ident: bytes, ts: int) -> StateChange:
        if st is None:
            return change(REMOVAL_NOT_FOUND, 0, 0)
        rows, idents = st[_ROWS], st[_IDENTS]
        n = len(idents)
        try:
            i = idents.index(ident)
        except ValueError:
            return change(REMOVAL_NOT_FOUND, n, n)
        if n == 1:
            self._state.remove(key)
            return change(REMOVAL_ALL, 1, 0, row)
        del rows[i]
        del idents[i]
        del st[_TSS][i]
        if self._key_ttl:
            # Only LEGACY's per-key TTL is refreshed by a retraction; VALUE's last write stays the newest add.
            st[_WRITTEN] = ts
        self._state.put(key, st)
        if i == n - 1:
            return change(REMOVAL_LAST_ADDED, n, n - 1, rows[-1])
        return change(REMOVAL_OTHER, n, n - 1)

    def expire(self, key: bytes, cutoff: int) -> int:
        st = self._state.get(key)
        if st is None:
            return 0
        if self._key_ttl:
            if st[_WRITTEN] <= cutoff:
                self._state.remove(key)
                return len(st[_ROWS])
            return 0
        tss = st[_TSS]
        k = 0
        for ts in tss:
            if ts > cutoff:
                break
            k += 1
        if k == 0:
            return 0
        if k == len(tss):
            self._state.remove(key)
            return k
        del st[_ROWS][:k]
        del st[_IDENTS][:k]
        del tss[:k]
        self._state.put(key, st)
        return k

    def entries(self, key: bytes) -> list[Entry]:
        st = self._state.get(key)
        if st is None:
            return []
        return [Entry(r, i, t) for r, i, t in zip(st[_ROWS], st[_IDENTS], st[_TSS])]

    def size(self, key: bytes) -> int:
        st = self._state.get(key)
        return 0 if st is None else len(st[_ROWS])

    def is_empty(self, key: bytes) -> bool:
        return self._state.get(key) is None   # an emptied list is removed, never stored

    def clear(self, key: bytes) -> None:
        self._state.remove(key)

    def load(self, key: bytes, entries: list[Entry]) -> None:
        if not entries:
            self._state.remove(key)
            return
        self._state.put(key, [[e.row for e in entries], [e.ident for e in entries], [e.ts for e in entries],
                              max(e.ts for e in entries)])

    def keys(self) -> Iterator[bytes]:
        return self._state.keys()


class AdaptiveMultiSet(SequencedMultiSet):
    """ADAPTIVE: ``small`` (VALUE) until a key's history reaches ``high`` elements, then ``large`` (MAP) until it
    falls to ``low``. A key uses ``large`` exactly when ``small`` is empty and ``large`` is not. The switch copies
    the elements in order (rows, idents and timestamps kept) and clears the source; the result of the operation
    that triggered it is returned unchanged, so switching never changes what is emitted."""

    def __init__(self, small: ListMultiSet, large: SequencedMultiSet, high: int, low: int) -> None:
        if not high > low >= 0:
            raise InvalidOptionError(THRESHOLD_HIGH_KEY, (high, low), "need threshold.high > threshold.low >= 0")
        self.small, self.large, self.high, self.low = small, large, high, low

    def _current(self, key: bytes) -> SequencedMultiSet:
        if self.small.is_empty(key) and not self.large.is_empty(key):
            return self.large
        return self.small

    def _settle(self, key: bytes, impl: SequencedMultiSet, size_after: int) -> None:
        if impl is self.large and size_after <= self.low:
            self._move(key, self.large, self.small)
        elif impl is self.small and size_after >= self.high:
            self._move(key, self.small, self.large)

    @staticmethod
    def _move(key: bytes, src: SequencedMultiSet, dst: SequencedMultiSet) -> None:
        moved = src.entries(key)
        src.clear(key)
        dst.load(key, moved)

    # The small list is read once and handed on, so a short history costs one state read per event, as VALUE.
    # add / append / remove repeat their routing inline: a shared helper cost measurably on this per-event path.
    def add(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        small = self.small
        st = small.read(key)
        if st is None and not self.large.is_empty(key):
            result = self.large.add(key, row, ident, ts)
            self._settle(key, self.large, result[2])
        else:
            result = small.add_to(key, st, row, ident, ts)
            self._settle(key, small, result[2])
        return result

    def append(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        small = self.small
        st = small.read(key)
        if st is None and not self.large.is_empty(key):
            result = self.large.append(key, row, ident, ts)
            self._settle(key, self.large, result[2])
        else:
            result = small.append_to(key, st, row, ident, ts)
            self._settle(key, small, result[2])
        return result

    def remove(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        small = self.small
        st = small.read(key)
        if st is None and not self.large.is_empty(key):
            result = self.large.remove(key, row, ident, ts)
            self._settle(key, self.large, result[2])
        else:
            result = small.remove_from(key, st, row, ident, ts)
            self._settle(key, small, result[2])
        return result

    def expire(self, key: bytes, cutoff: int) -> int:
        impl = self._current(key)
        dropped = impl.expire(key, cutoff)
        if dropped:
            self._settle(key, impl, impl.size(key))
        return dropped

    def entries(self, key: bytes) -> list[Entry]:
        return self._current(key).entries(key)

    def size(self, key: bytes) -> int:
        return self._current(key).size(key)

    def uses_large(self, key: bytes) -> bool:
        """Whether ``key``'s history currently lives in the MAP layout."""
        return self._current(key) is self.large

    def clear(self, key: bytes) -> None:
        self.small.clear(key)
        self.large.clear(key)

    def load(self, key: bytes, entries: list[Entry]) -> None:
        self.clear(key)
        (self.large if len(entries) >= self.high else self.small).load(key, entries)

    def keys(self) -> Iterator[bytes]:
        seen = set(self.small.keys())
        yield from seen
        yield from (k for k in self.large.keys() if k not in seen)
