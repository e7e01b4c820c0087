"""Oracle property test of schema evolution: random writes (upserts and deletes, in one or several flushes per
commit), interleaved with added columns, widened types, compactions and writes of a session opened before every
change (its rows lack the added columns), on primary-key and count tables of one or several buckets, against a
dict replay: after every step the table reads as the replay (rows written before a column was added have null in
it, widened values are equal), with the table's current types."""
from __future__ import annotations

import tempfile
from collections import Counter
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WIDER = {pa.int8(): pa.int16(), pa.int16(): pa.int32(), pa.int32(): pa.int64(), pa.float32(): pa.float64()}


def values_of(type_: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_integer(type_):
        bits = type_.bit_width - 1
        return st.integers(-(2**bits), 2**bits - 1) | st.none()
    if pa.types.is_float32(type_):
        return st.sampled_from([0.5, -2.25, 2.0**100]) | st.none()   # exact in float32
    if pa.types.is_float64(type_):
        return st.sampled_from([0.5, 1e300, -7.125]) | st.none()
    return st.sampled_from(["a", "b", ""]) | st.none()


class Replay:
    """The table as a dict: id -> row (primary key), or row -> count (no primary key); rows as tuples of every
    column in table order."""

    def __init__(self, pk: bool) -> None:
        self.pk = pk
        self.rows: dict[int, tuple[Any, ...]] = {}
        self.counts: Counter[tuple[Any, ...]] = Counter()

    def add_column(self) -> None:
        self.rows = {k: (*r, None) for k, r in self.rows.items()}
        self.counts = Counter({(*r, None): n for r, n in self.counts.items()})

    def apply(self, kind: str, row: tuple[Any, ...]) -> None:
        if self.pk:
            if kind == "+I":
                self.rows[row[0]] = row
            else:
                self.rows.pop(row[0], None)
        else:
            self.counts[row] = max(0, self.counts[row] + (1 if kind == "+I" else -1))

    def state(self) -> list[tuple[Any, ...]]:
        out = list(self.rows.values()) if self.pk else [r for r, n in self.counts.items() for _ in range(n)]
        return sorted(out, key=repr)


def table_of(schema: pa.Schema, kinds: list[str], rows: list[tuple[Any, ...]]) -> pa.Table:
    columns = {f.name: pa.array([r[i] for r in rows], f.type) for i, f in enumerate(schema)}
    return pa.table({"_row_kind": pa.array(kinds, pa.string()), **columns})


@SETTINGS
@given(pk=st.booleans(), bucket=st.sampled_from([1, 3]), write_only=st.booleans(), vectors=st.booleans(),
       data=st.data())
def test_evolving_table_matches_dict_replay(pk: bool, bucket: int, write_only: bool, vectors: bool,
                                            data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as wh:
        cat = tablestore.Catalog(wh)
        cat.create_database("db")
        schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.int8())])
        t = cat.create_table("db.t", schema, primary_key=["id"] if pk else None,
                             options={"bucket": str(bucket), "write-buffer-size": "1 kb", "target-file-size": "2 kb",
                                      "num-sorted-run.compaction-trigger": "2", "write-only": str(write_only).lower(),
                                      "deletion-vectors.enabled": str(pk and vectors).lower()})
        stale = t.log_writer()          # a session opened before every change, used all along
        width0 = len(schema)
        replay = Replay(pk)
        for step in range(data.draw(st.integers(1, 10), label="steps")):
            op = data.draw(st.sampled_from(["write", "write", "chunks", "stale", "add", "widen", "compact"]),
                           label=f"op {step}")
            current = t.schema
            if op in ("write", "chunks", "stale"):
                columns = current if op != "stale" else schema   # the stale session writes schema 0
                chunks = data.draw(st.integers(2, 3)) if op == "chunks" else 1
                session = stale if op == "stale" else t.log_writer()
                for _ in range(chunks):
                    n = data.draw(st.integers(1, 60), label="rows")
                    kinds = data.draw(st.lists(st.sampled_from(["+I", "+I", "-D"]), min_size=n, max_size=n))
                    rows = [(data.draw(st.integers(0, 15)),
                             *(data.draw(values_of(f.type)) for f in list(columns)[1:])) for _ in range(n)]
                    session.write(table_of(columns, kinds, rows))
                    for kind, row in zip(kinds, rows):
                        replay.apply(kind, (*row, *([None] * (len(current) - len(columns)))))
                session.commit()
                if session is not stale:
                    session.close()
            elif op == "add":
                type_ = data.draw(st.sampled_from([pa.int8(), pa.int16(), pa.float32(), pa.string()]))
                t.add_column(f"c{len(current)}", type_)
                replay.add_column()
            elif op == "widen":
                fields = [f for f in current if f.type in WIDER and (pk or current.names.index(f.name) >= width0)]
                if fields:
                    f = data.draw(st.sampled_from(fields))
                    t.alter_column_type(f.name, WIDER[f.type])
            else:
                t.compact(full=data.draw(st.booleans()))
            got = t.read()
            assert got.schema == t.schema, (step, op)
            assert sorted((tuple(r.values()) for r in got.to_pylist()), key=repr) == replay.state(), (step, op)
        stale.close()
        again = cat.get_table("db.t")   # a handle loaded now reads the same
        assert sorted((tuple(r.values()) for r in again.read().to_pylist()), key=repr) == replay.state()
