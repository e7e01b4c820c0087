"""Every merge engine (and `sequence.field`) held to a dict replay, through the file store's flush (a small write
buffer: several flushes per commit), compactions (full or picked, at random points) and reads (all columns, and a
projection without the ordering column): what a user reads is what replaying every row in order gives."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import catalog
from filestore import CommitKind, FileStore, RetractionNotSupportedError, ValueKind, compact
from filestore.merge_engine import MergeEngine, prepare_input
from filestore.merge_rules import merge_by_engine

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                           HealthCheck.function_scoped_fixture])
VALUES = ("x", "y", "z", "o")


@dataclass(frozen=True)
class Config:
    name: str
    options: dict[str, str]
    deletes: bool  # whether the engine takes -U/-D rows

    @property
    def engine(self) -> str:
        return self.options.get("merge-engine", "deduplicate")

    def function(self, column: str) -> str:
        if self.engine == "partial-update":
            return "last_non_null_value"
        return self.options.get(f"fields.{column}.aggregate-function", "last_non_null_value")


def agg(**functions: str) -> dict[str, str]:
    return {"merge-engine": "aggregation", **{f"fields.{c}.aggregate-function": f for c, f in functions.items()}}


CONFIGS = [
    Config("deduplicate-by-o", {"sequence.field": "o"}, deletes=True),
    Config("deduplicate-by-o-and-z", {"sequence.field": "o,z"}, deletes=True),
    Config("partial-update", {"merge-engine": "partial-update"}, deletes=False),
    Config("first-row", {"merge-engine": "first-row"}, deletes=False),
    Config("aggregation-retracting", agg(x="sum", y="last_value", z="last_value", o="count"), deletes=True),
    Config("aggregation-order", agg(x="max", y="min", z="bool_and", o="min"), deletes=False),
    Config("aggregation-firsts", agg(x="first_value", y="first_non_null_value", o="sum"), deletes=False),
    Config("aggregation-bool-or", agg(x="sum", z="bool_or", o="max"), deletes=False),
    Config("aggregation-by-o", {**agg(x="sum", y="last_value", z="last_value"), "sequence.field": "o"},
           deletes=True),
]

# a row: (key, x, y, z, o, is_delete), a small key space so keys meet across runs
row = st.tuples(st.integers(0, 12), st.integers(-5, 5) | st.none(), st.sampled_from(["a", "b", "c"]) | st.none(),
                st.booleans() | st.none(), st.integers(0, 4) | st.none(), st.booleans())
# a commit: its rows, then a compaction: none, picked or full
commit = st.tuples(st.lists(row, min_size=1, max_size=60), st.sampled_from([None, "pick", "full"]))


def schema(key_type: pa.DataType) -> pa.Schema:
    return pa.schema([pa.field("k", key_type, nullable=False), ("x", pa.int64()), ("y", pa.string()),
                      ("z", pa.bool_()), ("o", pa.int64())])


def key_of(k: int, key_type: pa.DataType) -> Any:
    return f"key{k:02d}" if pa.types.is_string(key_type) else k


def make_store(tmp: str, config: Config, key_type: pa.DataType) -> FileStore:
    cat = catalog.Catalog(tmp)
    cat.create_database("db", ignore_if_exists=True)
    options = {"bucket": "2", "write-buffer-size": "1 kb", **config.options}
    return cat.create_table("db.t", schema(key_type), ["k"], None, options).store


def oracle(config: Config, rows: list[tuple[Any, ...]]) -> dict[Any, dict[str, Any]]:
    """Replay every row of each key in its order (arrival, or sequence.field with nulls first, then arrival)."""
    by_key: dict[Any, list[tuple[int, tuple[Any, ...]]]] = {}
    for seq, r in enumerate(rows):
        by_key.setdefault(r[0], []).append((seq, r))
    fields = [f.strip() for f in config.options.get("sequence.field", "").split(",") if f.strip()]
    out: dict[Any, dict[str, Any]] = {}
    for key, records in by_key.items():
        def order(item: tuple[int, tuple[Any, ...]]) -> tuple[Any, ...]:
            values = [item[1][1 + VALUES.index(f)] for f in fields]
            return (*[(v is not None, v if v is not None else 0) for v in values], item[0])

        ordered = [r for _, r in sorted(records, key=order)]
        if config.engine == "deduplicate":
            last = ordered[-1]
            if not last[5]:
                out[key] = dict(zip(VALUES, last[1:5]))
        elif config.engine == "first-row":
            out[key] = dict(zip(VALUES, ordered[0][1:5]))
        else:
            out[key] = {c: ordered[-1][1 + i] if c in fields else  # an ordering column: the newest row's
                        column_value(config.function(c), [(r[1 + i], r[5]) for r in ordered])
                        for i, c in enumerate(VALUES)}
    return out


def column_value(function: str, values: list[tuple[Any, bool]]) -> Any:
    """A column's aggregate over (value, is_retraction) in order."""
    present = [v for v, _ in values if v is not None]
    if function == "sum":
        signed = [-v if d else v for v, d in values if v is not None]
        return sum(signed) if signed else None
    if function == "count":
        return sum((-1 if d else 1) for v, d in values if v is not None)
    if function == "last_value":
        v, d = values[-1]
        return None if d else v
    if function == "last_non_null_value":
        return present[-1] if present else None
    if function == "first_value":
        return values[0][0]
    if function == "first_non_null_value":
        return present[0] if present else None
    if function in ("max", "min"):
        return (max if function == "max" else min)(present) if present else None
    if function in ("bool_and", "bool_or"):
        return (all if function == "bool_and" else any)(present) if present else None
    raise AssertionError(function)


def write(store: FileStore, rows: list[tuple[Any, ...]], key_type: pa.DataType, identifier: int) -> None:
    data = pa.table({"k": [key_of(r[0], key_type) for r in rows], **{c: [r[1 + i] for r in rows]
                                                                     for i, c in enumerate(VALUES)}},
                    schema=schema(key_type))
    kinds = pa.array([int(ValueKind.DELETE if r[5] else ValueKind.ADD) for r in rows], pa.int8()).to_numpy()
    w = store.new_write()
    w.write(data, kinds)
    store.new_commit("writer").commit(w.prepare_commit(), identifier=identifier)


def read(store: FileStore, columns: list[str] | None = None) -> list[dict[str, Any]]:
    snapshot = store.snapshots.latest()
    table = store.new_read(columns).to_table(store.new_scan().plan(snapshot))
    return sorted(table.to_pylist(), key=lambda r: r["k"])


@pytest.mark.parametrize("config", CONFIGS, ids=[c.name for c in CONFIGS])
@pytest.mark.parametrize("key_type", [pa.int64(), pa.string()], ids=["int-key", "string-key"])
@SETTINGS
@given(commits=st.lists(commit, min_size=1, max_size=5))
def test_engine_equals_dict_replay(tmp_path_factory: pytest.TempPathFactory, config: Config,
                                   key_type: pa.DataType, commits: list[tuple[list[tuple[Any, ...]], str | None]]
                                   ) -> None:
    store = make_store(str(tmp_path_factory.mktemp("t")), config, key_type)
    applied: list[tuple[Any, ...]] = []
    for i, (rows, compaction) in enumerate(commits):
        rows = [r if config.deletes else (*r[:5], False) for r in rows]
        write(store, rows, key_type, i + 1)
        applied += rows
        if compaction is not None:
            messages = compact(store.context, store.snapshots.latest(), full=compaction == "full")
            if messages:
                store.new_commit("compactor").commit(messages, identifier=i + 1, kind=CommitKind.COMPACT)
    want = oracle(config, applied)
    expected = sorted(({"k": key_of(k, key_type), **v} for k, v in want.items()), key=lambda r: r["k"])
    assert read(store) == expected
    assert read(store, ["k", "x"]) == [{"k": r["k"], "x": r["x"]} for r in expected]


@pytest.mark.parametrize("config", [c for c in CONFIGS if not c.deletes], ids=[c.name for c in CONFIGS
                                                                               if not c.deletes])
def test_a_retraction_the_engine_cannot_take_is_refused(tmp_path: Any, config: Config) -> None:
    store = make_store(str(tmp_path), config, pa.int64())
    write(store, [(1, 1, "a", True, 1, False)], pa.int64(), 1)
    with pytest.raises(RetractionNotSupportedError, match="'db.t'") as raised:
        write(store, [(1, 1, "a", True, 1, True)], pa.int64(), 2)
    assert raised.value.table == "db.t"
    assert read(store) == [{"k": 1, "x": 1, "y": "a", "z": True, "o": 1}]  # nothing of that write applied


def test_a_float_sum_keeps_a_small_keys_digits_after_a_large_key(tmp_path: Any) -> None:
    """Each key's floating point sum is its own: 0.1 + 0.2 after a key summing to 2e17 stays 0.1 + 0.2 at flush,
    read and compaction (a difference of running sums over the whole bucket would give 0.1)."""
    cat = catalog.Catalog(str(tmp_path))
    cat.create_database("db")
    s = pa.schema([pa.field("k", pa.int64(), nullable=False), ("x", pa.float64())])
    store = cat.create_table("db.t", s, ["k"], None, {"bucket": "1", **agg(x="sum")}).store
    for i, rows in enumerate([{"k": [1, 2], "x": [1e17, 0.1]}, {"k": [1, 2], "x": [1e17, 0.2]},
                              {"k": [1, 2, 3], "x": [None, None, None]}]):
        w = store.new_write()
        w.write(pa.table(rows, schema=s))
        store.new_commit("writer").commit(w.prepare_commit(), identifier=i + 1)
    want = [{"k": 1, "x": 2e17}, {"k": 2, "x": 0.1 + 0.2}, {"k": 3, "x": None}]
    assert read(store) == want
    messages = compact(store.context, store.snapshots.latest(), full=True)
    store.new_commit("compactor").commit(messages, identifier=4, kind=CommitKind.COMPACT)
    assert read(store) == want


@SETTINGS
@given(rows=st.lists(st.tuples(st.integers(0, 6), st.floats(-1e6, 1e6) | st.none(), st.integers(-50, 50) | st.none(),
                               st.booleans()), min_size=1, max_size=80),
       functions=st.tuples(st.sampled_from(["sum", "max", "min"]), st.sampled_from(["sum", "max", "min", "count"])))
def test_numeric_aggregates_equal_dict_replay(rows: list[tuple[int, float | None, int | None, bool]],
                                              functions: tuple[str, str]) -> None:
    """The file store's merge of float and integer columns with nulls (and retractions where the function takes
    them) against a replay of each key's rows in arrival order."""
    f_function, i_function = functions
    retracting = f_function == "sum" and i_function in ("sum", "count")
    rows = [r if retracting else (*r[:3], False) for r in rows]
    records = pa.table({"k": [r[0] for r in rows], "f": pa.array([r[1] for r in rows], pa.float64()),
                        "i": pa.array([r[2] for r in rows], pa.int64()),
                        "_SEQUENCE_NUMBER": pa.array(range(len(rows)), pa.int64()),
                        "_VALUE_KIND": pa.array([int(ValueKind.DELETE if r[3] else ValueKind.ADD) for r in rows],
                                                pa.int8())})
    engine = MergeEngine("aggregation", aggregates=(("f", f_function), ("i", i_function)))
    merged = merge_by_engine(prepare_input(records, engine), ["k"], engine, final=True)
    by_key: dict[int, list[tuple[float | None, int | None, bool]]] = {}
    for k, f, i, retract in rows:
        by_key.setdefault(k, []).append((f, i, retract))
    want = {k: (column_value(f_function, [(f, d) for f, _, d in records_]),
                column_value(i_function, [(i, d) for _, i, d in records_])) for k, records_ in by_key.items()}
    got = {r["k"]: (r["f"], r["i"]) for r in merged.to_pylist()}
    assert got.keys() == want.keys()
    for k, (f, i) in want.items():
        assert got[k][0] == (pytest.approx(f, rel=1e-9, abs=1e-6) if f is not None else None), k
        assert got[k][1] == i, k
