"""MAP: the ordered multiset as a doubly linked list keyed by sequence number (Flink's ``LinkedMultiSetState``).

Three states per primary key (layouts are on-disk once checkpointed):
* ``meta`` (value): ``[low_sqn, high_sqn, size]``: the oldest and newest element and the element count.
  Absent == empty history. (Flink keeps ``{highSqn, size}``; ``low_sqn`` is added so TTL cleanup can start at
  the front in O(1).)
* ``nodes`` (map ``sqn -> node``): node = ``[row, ident, ts, prev_sqn, next_sqn, next_sqn_same_ident]``;
  prev/next link all elements in insertion order, ``next_sqn_same_ident`` chains the occurrences of one ident.
* ``idents`` (map ``ident -> [first_sqn, last_sqn]``): oldest and newest occurrence of an ident.

Invariants (hold after every operation, checked by the tests through :meth:`LinkedMultiSet.check`)
* Following ``next`` from ``low_sqn`` visits exactly ``size`` nodes, in increasing sqn order, ending at
  ``high_sqn``; ``prev`` is the mirror image.
* For each ident, following ``next_sqn_same_ident`` from ``first_sqn`` visits exactly that ident's nodes, in order,
  ending at ``last_sqn``; every node is reachable that way from its own ident and no other.
* When the history empties, all three states of the key are removed; sequence numbers restart at 0.
Holes in the sqn range (left by removals) are harmless: only the links matter.

Every operation makes O(1) state calls: ``append`` 3 reads + 4 writes, ``add`` of a known ident 3 calls,
``remove`` at most 5 reads + 5 writes, ``expire`` 2 calls + 4 per expired element.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tablestore.materializer.backend import StateBackend
from tablestore.materializer.multiset import (
    ADDITION, REMOVAL_ALL, REMOVAL_LAST_ADDED, REMOVAL_NOT_FOUND, REMOVAL_OTHER, Entry, Row,
    SequencedMultiSet, StateChange, change,
)

# node fields
_ROW, _IDENT, _TS, _PREV, _NEXT, _NEXT_SAME = 0, 1, 2, 3, 4, 5
# meta fields
_LOW, _HIGH, _SIZE = 0, 1, 2
# idents fields
_FIRST, _LAST = 0, 1


class LinkedMultiSet(SequencedMultiSet):
    """O(1)-per-event ordered multiset over one value state and two map states."""

    def __init__(self, backend: StateBackend, prefix: str = "") -> None:
        self._meta = backend.value_state(prefix + "meta")
        self._nodes = backend.map_state(prefix + "nodes")
        self._idents = backend.map_state(prefix + "idents")

    def add(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        meta = self._meta.get(key)
        if meta is not None:
            info = self._idents.get(key, ident)
            if info is not None:
                sqn = info[_FIRST]
                node = self._nodes.get(key, sqn)
                node[_ROW] = row
                node[_TS] = ts
                self._nodes.put(key, sqn, node)
                size: int = meta[_SIZE]
                return change(ADDITION, size, size)
        return self._append(key, meta, None, row, ident, ts)

    def append(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        meta = self._meta.get(key)
        info = None if meta is None else self._idents.get(key, ident)
        return self._append(key, meta, info, row, ident, ts)

    def _append(self, key: bytes, meta: list[int] | None, info: list[int] | None,
                row: Row, ident: bytes, ts: int) -> StateChange:
        nodes = self._nodes
        if meta is None:
            nodes.put(key, 0, [row, ident, ts, None, None, None])
            self._idents.put(key, ident, [0, 0])
            self._meta.put(key, [0, 0, 1])
            return change(ADDITION, 0, 1)
        high = meta[_HIGH]
        sqn = high + 1
        prev_node = nodes.get(key, high)
        prev_node[_NEXT] = sqn
        if info is None:
            self._idents.put(key, ident, [sqn, sqn])
        else:
            last = info[_LAST]
            if last == high:
                prev_node[_NEXT_SAME] = sqn
            else:
                last_node = nodes.get(key, last)
                last_node[_NEXT_SAME] = sqn
                nodes.put(key, last, last_node)
            info[_LAST] = sqn
            self._idents.put(key, ident, info)
        nodes.put(key, high, prev_node)
        nodes.put(key, sqn, [row, ident, ts, high, None, None])
        size = meta[_SIZE]
        self._meta.put(key, [meta[_LOW], sqn, size + 1])
        return change(ADDITION, size, size + 1)

    def remove(self, key: bytes, row: Row, ident: bytes, ts: int) -> StateChange:
        info = self._idents.get(key, ident)
        if info is None:
            meta = self._meta.get(key)
            size = 0 if meta is None else meta[_SIZE]
            return change(REMOVAL_NOT_FOUND, size, size)
        meta = self._meta.get(key)
        size = meta[_SIZE]
        if size == 1:
            self.clear(key)
            return change(REMOVAL_ALL, 1, 0, row)
        sqn = info[_FIRST]
        nodes = self._nodes
        node = nodes.get(key, sqn)
        nodes.remove(key, sqn)
        next_same = node[_NEXT_SAME]
        if next_same is None:
            self._idents.remove(key, ident)
        else:
            info[_FIRST] = next_same
            self._idents.put(key, ident, info)
        prev, nxt = node[_PREV], node[_NEXT]
        payload = None
        if prev is not None:
            prev_node = nodes.get(key, prev)
            prev_node[_NEXT] = nxt
            nodes.put(key, prev, prev_node)
            payload = prev_node[_ROW]
        if nxt is not None:
            next_node = nodes.get(key, nxt)
            next_node[_PREV] = prev
            nodes.put(key, nxt, next_node)
        self._meta.put(key, [nxt if prev is None else meta[_LOW], prev if nxt is None else meta[_HIGH], size - 1])
        if nxt is None:
            return change(REMOVAL_LAST_ADDED, size, size - 1, payload)
        return change(REMOVAL_OTHER, size, size - 1)

    def expire(self, key: bytes, cutoff: int) -> int:
        meta = self._meta.get(key)
        if meta is None:
            return 0
        nodes, idents = self._nodes, self._idents
        sqn = meta[_LOW]
        head = nodes.get(key, sqn)
        if head[_TS] > cutoff:
            return 0
        dropped = 0
        while head is not None and head[_TS] <= cutoff:
            # the front node is the oldest occurrence of its ident
            nodes.remove(key, sqn)
            ident = head[_IDENT]
            if head[_NEXT_SAME] is None:
                idents.remove(key, ident)
            else:
                info = idents.get(key, ident)
                info[_FIRST] = head[_NEXT_SAME]
                idents.put(key, ident, info)
            dropped += 1
            sqn = head[_NEXT]
            head = None if sqn is None else nodes.get(key, sqn)
        if head is None:
            self.clear(key)
            return dropped
        head[_PREV] = None
        nodes.put(key, sqn, head)
        self._meta.put(key, [sqn, meta[_HIGH], meta[_SIZE] - dropped])
        return dropped

    def entries(self, key: bytes) -> list[Entry]:
        items = sorted(self._nodes.items(key), key=lambda kv: kv[0])  # type: ignore[arg-type, return-value]
        return [Entry(n[_ROW], n[_IDENT], n[_TS]) for _, n in items]

    def size(self, key: bytes) -> int:
        meta = self._meta.get(key)
        return 0 if meta is None else int(meta[_SIZE])

    def is_empty(self, key: bytes) -> bool:
        return self._meta.get(key) is None

    def clear(self, key: bytes) -> None:
        self._meta.remove(key)
        self._nodes.clear(key)
        self._idents.clear(key)

    def load(self, key: bytes, entries: list[Entry]) -> None:
        self.clear(key)
        if not entries:
            return
        last_of: dict[bytes, int] = {}
        firsts: dict[bytes, int] = {}
        built: list[list[Any]] = []
        for sqn, e in enumerate(entries):
            built.append([e.row, e.ident, e.ts, sqn - 1 if sqn else None, None, None])
            if sqn:
                built[sqn - 1][_NEXT] = sqn
            prev_same = last_of.get(e.ident)
            if prev_same is None:
                firsts[e.ident] = sqn
            else:
                built[prev_same][_NEXT_SAME] = sqn
            last_of[e.ident] = sqn
        for sqn, node in enumerate(built):
            self._nodes.put(key, sqn, node)
        for ident, first in firsts.items():
            self._idents.put(key, ident, [first, last_of[ident]])
        self._meta.put(key, [0, len(built) - 1, len(built)])

    def keys(self) -> Iterator[bytes]:
        return self._meta.keys()

    def check(self, key: bytes) -> None:
        """Assert the invariants of the module docstring for ``key`` (tests and debugging; O(n))."""
        meta = self._meta.get(key)
        nodes = dict(self._nodes.items(key))
        idents = dict(self._idents.items(key))
        if meta is None:
            assert not nodes and not idents, "empty meta but nodes/idents left behind"
            return
        order: list[int] = []
        sqn, prev = meta[_LOW], None
        while sqn is not None:
            node = nodes[sqn]
            assert node[_PREV] == prev, f"node {sqn}: prev {node[_PREV]} != {prev}"
            assert not order or sqn > order[-1], "sqns not increasing along next"
            order.append(sqn)
            prev, sqn = sqn, node[_NEXT]
        assert order[-1] == meta[_HIGH] and len(order) == meta[_SIZE] == len(nodes), "meta/links disagree"
        chained: set[int] = set()
        for ident, (first, last) in idents.items():
            sqn, seen = first, []
            while sqn is not None:
                assert nodes[sqn][_IDENT] == ident, f"node {sqn} chained under a foreign ident"
                seen.append(sqn)
                sqn = nodes[sqn][_NEXT_SAME]
            assert seen[-1] == last and seen == sorted(seen), f"ident chain {seen} ends at {last}"
            chained.update(seen)
        assert chained == set(nodes), "nodes not reachable from their ident"
