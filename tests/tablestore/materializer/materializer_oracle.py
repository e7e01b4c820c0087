"""A plain-Python reference of Flink's legacy SinkUpsertMaterializer list semantics (the oracle of the tests).

Written straight from the pseudo-code of Flink's ``processElement`` / ``addRow`` / ``retractRow``: one list of
rows per primary key, matched by Python equality of the upsert-key projection (or of the whole row). TTL modes:
``"key"`` = Flink's per-key state TTL (LEGACY), ``"entry"`` = per-entry front expiry (VALUE / MAP / ADAPTIVE).
Tests only feed it values whose Python equality is binary equality (no floats).
"""
from __future__ import annotations

from typing import Any, Literal, Sequence

Row = tuple[Any, ...]


class ReferenceMaterializer:
    def __init__(self, primary_key: Sequence[int], upsert_key: Sequence[int] | None,
                 ttl_ms: int | None = None, ttl_mode: Literal["key", "entry"] = "key") -> None:
        self.pk = tuple(primary_key)
        self.uk = tuple(upsert_key) if upsert_key else None
        self.ttl = ttl_ms if ttl_ms and ttl_ms > 0 else None
        self.ttl_mode = ttl_mode
        self.values: dict[Row, list[tuple[Row, int]]] = {}   # pk -> [(row, ts)]
        self.written: dict[Row, int] = {}
        self.cleared = 0
        self.now = 0

    def _match(self, a: Row, b: Row) -> bool:
        if self.uk is None:
            return a == b
        return all(a[i] == b[i] for i in self.uk)

    def process(self, kind: str, row: Row, now_ms: int | None = None) -> list[tuple[str, Row]]:
        if now_ms is not None:
            self.now = now_ms
        now = self.now
        key = tuple(row[i] for i in self.pk)
        values = self.values.get(key, [])
        if self.ttl is not None and values:
            if self.ttl_mode == "key":
                if self.written[key] + self.ttl <= now:
                    values = []
            else:
                while values and values[0][1] + self.ttl <= now:
                    values = values[1:]
        if kind in ("+I", "+U"):
            out_kind = "+I" if not values else "+U"
            idx = next((i for i, (r, _) in enumerate(values) if self._match(r, row)), -1) if self.uk else -1
            if idx >= 0:
                values[idx] = (row, now)
            else:
                values.append((row, now))
            self._store(key, values, now)
            return [(out_kind, row)]
        last = len(values) - 1
        idx = next((i for i, (r, _) in enumerate(values) if self._match(r, row)), -1)
        if idx < 0:
            self.cleared += 1
            self._store(key, values, None)
            return []
        del values[idx]
        self._store(key, values, now)
        if not values:
            return [("-D", row)]
        if idx == last:
            return [("+U", values[-1][0])]
        return []

    def _store(self, key: Row, values: list[tuple[Row, int]], now: int | None) -> None:
        if not values:
            self.values.pop(key, None)
            self.written.pop(key, None)
            return
        self.values[key] = values
        if now is not None:
            self.written[key] = now

    def history(self, key: Row) -> list[Row]:
        return [r for r, _ in self.values.get(key, [])]
