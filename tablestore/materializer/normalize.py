"""The changelog normalizer: an upsert (or duplicate-carrying) stream in, a regular changelog out.

Flink's ``ChangelogNormalize`` (``ProcTimeDeduplicateKeepLastRowFunction`` on the changelog path,
``DeduplicateFunctionHelper.processLastRowOnChangelog``), keyed by the source's primary key. One value per key:
the last row stored (``[row, full-row key bytes, write time]``; absent == never seen, deleted or expired).

* +I / +U, nothing stored          -> ``("+I", row)``; store row.
* +I / +U, same content stored     -> nothing, state untouched, when TTL is disabled (duplicate swallowed);
                                      with TTL it is re-emitted like a change (keeps downstream state alive).
* +I / +U, other content stored    -> ``("-U", stored)`` if ``generate_update_before``, then ``("+U", row)``;
                                      store row.
* -U / -D, something stored        -> ``("-D", stored row)`` (the FULL stored row, even for a key-only delete
                                      whose value columns are null); forget the key.
* -U / -D, nothing stored          -> nothing.
"Same content" is binary equality of the whole row (key codec bytes), the row kind ignored.

TTL (``state_ttl_ms``; unset or <= 0 disables it): Flink's state TTL, OnCreateAndWrite / NeverReturnExpired:
the stored row expires once ``write time + ttl <= now``. Not reproduced: Flink's pushed-down filter and the
mini-batch variant (which keeps only the last change per key of a bundle); ``process_batch`` processes every
change, exactly like ``process`` row by row.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tablestore.materializer.backend import InMemoryStateBackend, StateBackend
from tablestore.materializer.changes import (
    DELETE, INSERT, IS_ADD, UPDATE_AFTER, UPDATE_BEFORE, Change, KeyedChangeProcessor,
)
from tablestore.materializer.errors import InvalidOptionError, InvalidRowKindError

STATE_NAME = "changelog-normalize"
_ROW, _FULL, _WRITTEN = 0, 1, 2


class ChangelogNormalizer(KeyedChangeProcessor):
    """Turns an upsert stream into a full changelog, per key (key fields are positions in the row tuple)."""

    def __init__(self, key: Sequence[int], generate_update_before: bool = True, state_ttl_ms: int | None = None,
                 *, row_types: Sequence[pa.DataType] | None = None, backend: StateBackend | None = None) -> None:
        super().__init__(row_types)
        if isinstance(state_ttl_ms, bool) or not (state_ttl_ms is None or isinstance(state_ttl_ms, int)):
            raise InvalidOptionError("state_ttl_ms", state_ttl_ms, "expected an integer number of ms or None")
        self.key = tuple(key)
        self.generate_update_before = generate_update_before
        self.state_ttl_ms = state_ttl_ms if state_ttl_ms is not None and state_ttl_ms > 0 else None
        self.backend = backend if backend is not None else InMemoryStateBackend()
        self._state = self.backend.value_state(STATE_NAME)
        self._key = self._rows.projection(self.key, cached=True)
        self._full = self._rows.projection(None)

    def process(self, kind: str, row: Sequence[Any], now_ms: int | None = None) -> list[Change]:
        is_add = IS_ADD.get(kind)
        if is_add is None:
            raise InvalidRowKindError(kind)
        row = tuple(row)
        self._rows.observe(row)
        now = self._tick(now_ms)
        key = self._key.encode(row)
        state = self._state
        pre = state.get(key)
        ttl = self.state_ttl_ms
        if pre is not None and ttl is not None and pre[_WRITTEN] + ttl <= now:
            state.remove(key)
            pre = None
        if not is_add:
            if pre is None:
                return []
            state.remove(key)
            return [(DELETE, pre[_ROW])]
        full = self._full.encode(row)
        if pre is None:
            state.put(key, [row, full, now])
            return [(INSERT, row)]
        if ttl is None and pre[_FULL] == full:
            return []
        state.put(key, [row, full, now])
        if self.generate_update_before:
            return [(UPDATE_BEFORE, pre[_ROW]), (UPDATE_AFTER, row)]
        return [(UPDATE_AFTER, row)]

    def cleanup(self, now_ms: int) -> int:
        """Forget every key whose stored row has expired; returns how many."""
        ttl = self.state_ttl_ms
        if ttl is None:
            return 0
        state = self._state
        expired = [k for k in state.keys() if state.get(k)[_WRITTEN] + ttl <= now_ms]
        for k in expired:
            state.remove(k)
        return len(expired)

    def current(self, key: Sequence[Any]) -> tuple[Any, ...] | None:
        """The row currently stored for ``key`` (its values in key order), or ``None``."""
        if self._rows.arity is None:
            return None
        probe: list[Any] = [None] * self._rows.arity
        for pos, value in zip(self.key, key, strict=True):
            probe[pos] = value
        pre = self._state.get(self._key.encode(tuple(probe)))
        return None if pre is None else tuple(pre[_ROW])
