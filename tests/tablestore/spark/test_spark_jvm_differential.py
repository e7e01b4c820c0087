"""The JVM operator (tablestore Spark jar) gives exactly the library's output (tablestore.materializer, the
reference semantics) on random changelogs: every strategy's TTL flavour, with and without an upsert key, float
identities (-0.0, NaN), a key's history saved and reloaded between micro-batches; and through Spark itself."""
from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tablestore.materializer import UpsertMaterializer
from tablestore.spark import upsert_materialize

pytestmark = pytest.mark.spark

KINDS = ("+I", "-U", "+U", "-D")
FLOATS = (1.5, 0.0, -0.0, math.nan)
# an event: kind, upsert key value, float value, time step
events_st = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 2), st.sampled_from(FLOATS),
                               st.integers(0, 4)), max_size=40)


def norm(value: Any) -> Any:
    """Floats by identity: NaN equals NaN, -0.0 differs from 0.0."""
    return repr(value) if isinstance(value, float) else value


def python_outputs(strategy: str, upsert: bool, ttl: int | None, events: list[tuple[str, int, float, int]],
                   key: int = 7) -> list[tuple[Any, ...]]:
    m = UpsertMaterializer(primary_key=[0], upsert_key=[1] if upsert else None, strategy=strategy,  # type: ignore[arg-type]
                           ttl_ms=ttl)
    out, now = [], 0
    for kind, uk, v, step in events:
        now += step
        out += [(k, *map(norm, row)) for k, row in m.process(kind, (key, uk, v), now_ms=now)]
    return out


def jvm_outputs(spark: Any, strategy: str, upsert: bool, ttl: int | None,
                events: list[tuple[str, int, float, int]], reload_every: int) -> list[tuple[Any, ...]]:
    """The same events through the JVM classes over py4j; rows are (kind, id, uk, v, seq); every
    `reload_every` events the history is saved and loaded into a fresh one, as between micro-batches."""
    gw = spark.sparkContext._gateway
    jvm = gw.jvm
    pkg = jvm.tablestore.spark.jvm
    ident = gw.new_array(jvm.int, 1 if upsert else 3)
    for i, pos in enumerate([2] if upsert else [1, 2, 3]):
        ident[i] = pos
    m = pkg.Materializer(0, 4, ident, upsert, strategy == "LEGACY", ttl or 0)
    history = m.newHistory()
    out = jvm.java.util.ArrayList()
    now = 0
    for n, (kind, uk, v, step) in enumerate(events):
        now += step
        values = gw.new_array(jvm.java.lang.Object, 5)
        for i, value in enumerate((kind, 7, uk, v, n)):
            values[i] = value
        m.process(history, jvm.org.apache.spark.sql.RowFactory.create(values), now, out)
        if (n + 1) % reload_every == 0:
            rows, times = jvm.java.util.ArrayList(), jvm.java.util.ArrayList()
            history.save(rows, times)
            written = history.lastWrite()
            history = m.newHistory()
            for i in range(rows.size()):
                history.load(rows.get(i), times.get(i))
            history.setLastWrite(written)
    return [tuple(norm(out.get(i).get(j)) for j in range(4)) for i in range(out.size())]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(events=events_st, strategy=st.sampled_from(["LEGACY", "VALUE", "MAP", "ADAPTIVE"]), upsert=st.booleans(),
       ttl=st.sampled_from([None, 3, 8]), reload_every=st.integers(1, 7))
# LEGACY's key TTL is refreshed by a retraction that found its row: B is still there at t=5
@example(events=[("+I", 0, 1.5, 0), ("+I", 1, 1.5, 1), ("-U", 0, 1.5, 2), ("-U", 1, 1.5, 2)], strategy="LEGACY",
         upsert=False, ttl=3, reload_every=7)
def test_jvm_history_matches_the_library(spark: Any, events: list[tuple[str, int, float, int]], strategy: str,
                                         upsert: bool, ttl: int | None, reload_every: int) -> None:
    assert jvm_outputs(spark, strategy, upsert, ttl, events, reload_every) == \
        python_outputs(strategy, upsert, ttl, events)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(per_key=st.lists(events_st, min_size=1, max_size=60), upsert=st.booleans())
def test_spark_operator_matches_the_library_per_key(spark: Any, per_key: list[list[tuple[str, int, float, int]]],
                                                    upsert: bool) -> None:
    """Many keys' random changelogs in one DataFrame through upsert_materialize (ordered by seq)."""
    rows = [(kind, key, uk, v, seq) for key, events in enumerate(per_key)
            for seq, (kind, uk, v, _) in enumerate(events)]
    if not rows:
        return
    df = spark.createDataFrame(rows, "_row_kind string, id long, uk long, v double, seq long")
    got = upsert_materialize(df, primary_key=["id"], upsert_key=["uk"] if upsert else None,
                             strategy="ADAPTIVE", order_by="seq").collect()
    by_key: dict[int, list[tuple[int, tuple[Any, ...]]]] = {}
    for r in got:
        by_key.setdefault(r["id"], []).append((r["seq"], (r["_row_kind"], r["id"], r["uk"], norm(r["v"]))))
    for key, events in enumerate(per_key):
        expected = python_outputs("ADAPTIVE", upsert, None, [(k, uk, v, 0) for k, uk, v, _ in events], key=key)
        assert [o for _, o in sorted(by_key.get(key, []))] == expected, f"key {key}"
