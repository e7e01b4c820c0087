"""The upsert materializer: puts an out-of-order changelog back in order per sink primary key.

Flink's ``SinkUpsertMaterializer`` (LEGACY) and ``SinkUpsertMaterializerV2`` (VALUE, MAP, ADAPTIVE), event for
event. Per primary key it keeps the history of added rows (``multiset.py``, ``linked.py``):

* ADD (+I, +U): with an upsert key the row replaces, in place, the element with the same upsert key (else it is
  appended); without one it is always appended. The row is forwarded as ``+I`` if the history was empty
  before, else as ``+U`` (even when it replaced an older, non-last element: Flink forwards every ADD).
* RETRACT (-U, -D): the oldest element matching the row (by upsert key, else by the whole row) is removed.
  - history now empty         -> ``("-D", the retraction row as received)``;
  - the newest element removed -> ``("+U", the element now newest)`` (roll back to the previous version);
  - an older element removed   -> nothing;
  - nothing matched            -> nothing; counted in ``state_cleared_count`` and logged ("state cleared").
Output kinds are only +I, +U and -D. Matching ignores the row kind.

TTL (``ttl_ms``; unset or <= 0 disables it). An event for a key first drops that key's expired entries;
:meth:`UpsertMaterializer.cleanup` sweeps every key (the periodic cleanup). Nothing is emitted on expiry.
* LEGACY: Flink's per-key state TTL: the whole history expires once ``last write + ttl <= now``; adds and
  retractions that found their row are writes.
* VALUE / MAP / ADAPTIVE: per entry (Flink's V2 has no TTL; this is the issue's operator-level TTL): an entry
  written at ``ts`` is expired once ``ts + ttl <= now`` and is dropped from the front of the history, so an
  entry never leaves early but may outlive its TTL behind an entry refreshed in place by an upsert-key ADD.
"""
from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

import pyarrow as pa

from tablestore.materializer.backend import InMemoryStateBackend, StateBackend
from tablestore.materializer.changes import DELETE, INSERT, IS_ADD, UPDATE_AFTER, Change, KeyedChangeProcessor
from tablestore.materializer.errors import InvalidRowKindError
from tablestore.materializer.linked import LinkedMultiSet
from tablestore.materializer.multiset import (
    REMOVAL_ALL, REMOVAL_LAST_ADDED, REMOVAL_NOT_FOUND, AdaptiveMultiSet, ListMultiSet, SequencedMultiSet,
)
from tablestore.materializer.options import MaterializeOptions, Strategy

logger = logging.getLogger(__name__)

STATE_CLEARED_WARN_MSG: Final = ("The state is cleared because of state ttl. This will result in incorrect result. "
                                 "You can increase the state ttl to avoid this.")
NOT_FOUND_MSG: Final = "Not found record to retract"


def build_multiset(options: MaterializeOptions, backend: StateBackend) -> SequencedMultiSet:
    """The history structure of a strategy, over ``backend`` (state names: ``values``; ``list``, ``meta``,
    ``nodes``, ``idents``)."""
    if options.strategy == "LEGACY":
        return ListMultiSet(backend, "values", key_ttl=True)
    if options.strategy == "VALUE":
        return ListMultiSet(backend, "list")
    if options.strategy == "MAP":
        return LinkedMultiSet(backend)
    return AdaptiveMultiSet(ListMultiSet(backend, "list"), LinkedMultiSet(backend),
                            options.threshold_high, options.threshold_low)


class UpsertMaterializer(KeyedChangeProcessor):
    """Reorders a changelog per primary key. Key fields are positions in the row tuple."""

    def __init__(self, primary_key: Sequence[int], upsert_key: Sequence[int] | None = None,
                 strategy: Strategy = "LEGACY", ttl_ms: int | None = None,
                 threshold_high: int | None = None, threshold_low: int | None = None, *,
                 row_types: Sequence[pa.DataType] | None = None, backend: StateBackend | None = None) -> None:
        super().__init__(row_types)
        self.backend = backend if backend is not None else InMemoryStateBackend()
        self.options = MaterializeOptions.resolve(strategy, threshold_high=threshold_high,
                                                  threshold_low=threshold_low, ttl_ms=ttl_ms,
                                                  backend_type=self.backend.type_identifier)
        self.primary_key = tuple(primary_key)
        self.upsert_key = tuple(upsert_key) if upsert_key else None
        self._pk = self._rows.projection(self.primary_key, cached=True)
        self._ident = self._rows.projection(self.upsert_key) if self.upsert_key else self._rows.projection(None)
        self._history = build_multiset(self.options, self.backend)
        self._ttl = self.options.ttl_ms
        self._legacy = self.options.strategy == "LEGACY"
        self._state_cleared = 0
        self._expired = 0

    @property
    def state_cleared_count(self) -> int:
        """Retractions that found no matching row (TTL expiry or a row never seen); nothing was emitted."""
        return self._state_cleared

    @property
    def expired_count(self) -> int:
        """History entries dropped by TTL so far."""
        return self._expired

    def process(self, kind: str, row: Sequence[Any], now_ms: int | None = None) -> list[Change]:
        is_add = IS_ADD.get(kind)
        if is_add is None:
            raise InvalidRowKindError(kind)
        row = tuple(row)
        rows = self._rows
        if rows.arity != len(row) or rows.pending:
            rows.observe(row)
        if now_ms is None:
            now = self._clock
        else:
            now = self._clock = now_ms
        key = self._pk.encode(row)
        ident = self._ident.encode(row)
        history = self._history
        if self._ttl is not None:
            self._expired += history.expire(key, now - self._ttl)
        if is_add:
            change = (history.add(key, row, ident, now) if self.upsert_key is not None
                      else history.append(key, row, ident, now))
            return [(INSERT if change[1] == 0 else UPDATE_AFTER, row)]     # [1]: size_before
        change = history.remove(key, row, ident, now)
        ctype = change[0]
        if ctype is REMOVAL_LAST_ADDED:
            return [(UPDATE_AFTER, change[3])]  # type: ignore[list-item]   # [3]: payload
        if ctype is REMOVAL_ALL:
            return [(DELETE, row)]
        if ctype is REMOVAL_NOT_FOUND:
            self._state_cleared += 1
            if self._legacy:
                logger.info("%s (key %s, %s %s)", STATE_CLEARED_WARN_MSG, key.hex(), kind, row)
            else:
                logger.warning("%s (key %s, %s %s)", NOT_FOUND_MSG, key.hex(), kind, row)
        return []

    def cleanup(self, now_ms: int) -> int:
        """Drop expired history entries of every key (the periodic TTL cleanup); returns how many."""
        if self._ttl is None:
            return 0
        cutoff = now_ms - self._ttl
        history = self._history
        dropped = sum(history.expire(key, cutoff) for key in list(history.keys()))
        self._expired += dropped
        return dropped

    def history(self, key: Sequence[Any]) -> list[tuple[Any, ...]]:
        """The current history of one primary key (its values, in primary-key order), oldest first."""
        return [e.row for e in self._history.entries(self._key_bytes(key))]

    def history_timestamps(self, key: Sequence[Any]) -> list[int]:
        """The write times of :meth:`history`'s entries."""
        return [e.ts for e in self._history.entries(self._key_bytes(key))]

    def keys(self) -> list[tuple[object, ...]]:
        """The primary keys that hold history, in key order."""
        return [self._pk.decode(k) for k in sorted(self._history.keys())]

    def state_key(self, key: Sequence[Any]) -> bytes:
        """The state-backend key of one primary key (its values in primary-key order): what
        `InMemoryStateBackend.export_key` / `import_key` take to move that key's whole history."""
        return self._key_bytes(key)

    @property
    def multiset(self) -> SequencedMultiSet:
        """The history structure (for the Spark operator and for invariant checks in tests)."""
        return self._history

    def _key_bytes(self, key: Sequence[Any]) -> bytes:
        if self._rows.arity is None:
            return b""
        probe: list[Any] = [None] * self._rows.arity
        for pos, value in zip(self.primary_key, key, strict=True):
            probe[pos] = value
        return self._pk.encode(tuple(probe))
