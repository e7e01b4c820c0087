"""Row identity: projections of row tuples encoded with the project's order-preserving key codec.

Rows arrive as Python tuples. The primary key, the upsert key and (without an upsert key) the whole row are
identified by ``filestore.keycodec.KeyCodec`` bytes of their projection, so equality is the codec's binary
equality (``-0.0 != 0.0``, ``NaN == NaN``, like Flink's binary row comparison) and the bytes are the same ones
Spark's state store will be keyed by.

Column types are declared (``row_types``) or inferred, column by column, from the first non-null value seen
(``pa.scalar(v).type``; an Arrow batch supplies its schema). A column seen only as null is still encodable:
the codec writes a null as the single byte 0x00 whatever the type, so a placeholder type stands in until a
value arrives, and keys encoded before that stay valid. Declare ``row_types`` when inference could pick the
wrong type (decimals of varying scale, timestamps with time zones, small integer widths).
"""
from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa

from filestore import FileStoreError, KeyCodec
from tablestore.materializer.errors import RowShapeError

_PLACEHOLDER = pa.bool_()  # any codec-able type: only nulls are encoded with it


def infer_type(value: object) -> pa.DataType | None:
    """The Arrow type pyarrow infers for one Python value; ``None`` for a null."""
    if value is None:
        return None
    try:
        return pa.scalar(value).type
    except (pa.ArrowException, TypeError, ValueError) as exc:
        raise RowShapeError(value, f"cannot infer an Arrow type: {exc}; pass row_types") from exc


# Types whose Python equality (with the exact type) is the codec's binary equality, so a single-column key's
# bytes can be reused for an equal value: not float (-0.0 == 0.0, NaN != NaN) and not Decimal.
_CACHEABLE = frozenset({int, str, bytes, bool, dt.date, dt.datetime})
_CACHE_LIMIT = 4096


class Projection:
    """Encodes the values at ``positions`` of a row (``None``: the whole row); rebuilt by :class:`RowCodec` when
    a type becomes known."""

    __slots__ = ("positions", "whole_row", "cached", "encode", "_codec")

    def __init__(self, positions: Sequence[int] | None, *, cached: bool = False) -> None:
        self.whole_row = positions is None
        self.cached = cached
        self.positions: tuple[int, ...] = () if positions is None else tuple(positions)
        self._codec: KeyCodec | None = None
        self.encode: Callable[[tuple[Any, ...]], bytes] = self._not_ready

    def _not_ready(self, row: tuple[Any, ...]) -> bytes:
        raise RowShapeError(row, "row types are not known yet")

    def bind(self, types: Sequence[pa.DataType | None]) -> None:
        if self.whole_row:
            self.positions = tuple(range(len(types)))
        chosen = [_PLACEHOLDER if types[p] is None else types[p] for p in self.positions]
        try:
            codec = KeyCodec(chosen)
        except FileStoreError as exc:
            raise RowShapeError(self.positions, f"key columns {self.positions} have no key encoding: {exc}") from exc
        self._codec = codec
        raw = codec.encode
        positions = self.positions

        if self.whole_row:
            def encode(row: tuple[Any, ...]) -> bytes:
                try:
                    return raw(row)
                except FileStoreError as exc:
                    raise RowShapeError(row, f"{exc}; pass row_types") from exc
        elif len(positions) == 1 and self.cached:
            (p,) = positions
            cache: dict[tuple[type, Any], bytes] = {}

            def encode(row: tuple[Any, ...]) -> bytes:
                value = row[p]
                kind = value.__class__
                hit = cache.get((kind, value)) if kind in _CACHEABLE else None
                if hit is not None:
                    return hit
                try:
                    key = raw((value,))
                except FileStoreError as exc:
                    raise RowShapeError(row, f"column {p}: {exc}; pass row_types") from exc
                if kind in _CACHEABLE:
                    if len(cache) >= _CACHE_LIMIT:
                        cache.clear()
                    cache[(kind, value)] = key
                return key
        elif len(positions) == 1:
            (p,) = positions

            def encode(row: tuple[Any, ...]) -> bytes:
                try:
                    return raw((row[p],))
                except FileStoreError as exc:
                    raise RowShapeError(row, f"column {p}: {exc}; pass row_types") from exc
        else:
            def encode(row: tuple[Any, ...]) -> bytes:
                try:
                    return raw([row[i] for i in positions])
                except FileStoreError as exc:
                    raise RowShapeError(row, f"columns {positions}: {exc}; pass row_types") from exc
        self.encode = encode

    def decode(self, key: bytes) -> tuple[object, ...]:
        if self._codec is None:
            raise RowShapeError(key, "row types are not known yet")
        return self._codec.decode(key)


class RowCodec:
    """The row shape (arity and column types) and the projections encoded from it."""

    def __init__(self, row_types: Sequence[pa.DataType] | None = None) -> None:
        self._projections: list[Projection] = []
        self._types: list[pa.DataType | None] | None = None
        self.pending: tuple[int, ...] = ()
        self.arity: int | None = None
        if row_types is not None:
            self.set_types(row_types)

    @property
    def types(self) -> list[pa.DataType | None] | None:
        """Column types (``None`` for a column seen only as null so far), or ``None`` before the first row."""
        return None if self._types is None else list(self._types)

    def projection(self, positions: Sequence[int] | None, *, cached: bool = False) -> Projection:
        """A projection of ``positions``, or of the whole row when ``None``. ``cached``: remember the bytes of
        recent single-column keys (for the grouping key, which repeats)."""
        if positions is not None and not positions:
            raise RowShapeError(tuple(positions), "a key needs at least one column")
        proj = Projection(positions, cached=cached)
        self._projections.append(proj)
        if self._types is not None:
            self._check_positions(proj)
            proj.bind(self._types)
        return proj

    def set_types(self, row_types: Sequence[pa.DataType | None]) -> None:
        """Declare the column types (e.g. from an Arrow schema); no-op once types are known."""
        if self._types is not None:
            return
        types = [None if t is None or pa.types.is_null(t) else t for t in row_types]
        self._types = types
        self.arity = len(types)
        self.pending = tuple(i for i, t in enumerate(types) if t is None)
        for proj in self._projections:
            self._check_positions(proj)
            proj.bind(types)

    def observe(self, row: tuple[Any, ...]) -> None:
        """Check the row's arity; learn column types from it while some are unknown. O(1) once all are known."""
        if self.arity != len(row):
            if self._types is None:
                self.set_types([infer_type(v) for v in row])
                return
            raise RowShapeError(row, f"expected {self.arity} columns, got {len(row)}")
        if self.pending:
            assert self._types is not None
            learned = [(i, infer_type(row[i])) for i in self.pending if row[i] is not None]
            if learned:
                for i, t in learned:
                    self._types[i] = t
                self.pending = tuple(i for i in self.pending if self._types[i] is None)
                for proj in self._projections:
                    if any(i in proj.positions for i, _ in learned):
                        proj.bind(self._types)

    def _check_positions(self, proj: Projection) -> None:
        assert self.arity is not None
        bad = [p for p in proj.positions if not 0 <= p < self.arity]
        if bad:
            raise RowShapeError(proj.positions, f"key positions {bad} outside a row of {self.arity} columns")
