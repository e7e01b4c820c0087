"""Flink's own SinkUpsertMaterializer scenarios, through every strategy."""
from __future__ import annotations

import logging
from typing import Any

import pytest

from tablestore.materializer import InvalidOptionError, InvalidRowKindError, MaterializerError, UpsertMaterializer
from tablestore.materializer.linked import LinkedMultiSet
from tablestore.materializer.multiset import AdaptiveMultiSet

STRATEGIES = ["LEGACY", "VALUE", "MAP", "ADAPTIVE"]
Row = tuple[Any, ...]


def run(m: UpsertMaterializer, events: list[tuple[str, Row]] | list[tuple[str, Row, int]]) -> list[list[tuple[str, Row]]]:
    return [m.process(e[0], e[1], now_ms=e[2] if len(e) > 2 else None) for e in events]  # type: ignore[misc]


def upsert_sink(outputs: list[list[tuple[str, Row]]], pk: int) -> dict[Any, Row]:
    """A naive sink applying changes as upserts (+I, +U) and deletes (-U, -D) by primary key."""
    table: dict[Any, Row] = {}
    for batch in outputs:
        for kind, row in batch:
            if kind in ("-U", "-D"):
                table.pop(row[pk], None)
            else:
                table[row[pk]] = row
    return table


# --- the blog: s1 JOIN s2 -> t1(id, level, attr), PK id; +I(1,10,a1) -U(1,10,a1) +U(1,20,b1) arrive shuffled ---
A, B = (1, 10, "a1"), (1, 20, "b1")
BLOG_ORDERS = {
    "in order": ([("+I", A), ("-U", A), ("+U", B)],
                 [[("+I", A)], [("-D", A)], [("+I", B)]]),
    "update before last": ([("+I", A), ("+U", B), ("-U", A)],
                           [[("+I", A)], [("+U", B)], []]),
    "update after first": ([("+U", B), ("+I", A), ("-U", A)],
                           [[("+I", B)], [("+U", A)], [("+U", B)]]),
}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("upsert_key", [None, [0, 1]])
@pytest.mark.parametrize("order", sorted(BLOG_ORDERS))
def test_blog_every_arrival_order_ends_with_the_update(strategy: str, upsert_key: list[int] | None,
                                                       order: str) -> None:
    events, expected = BLOG_ORDERS[order]
    m = UpsertMaterializer(primary_key=[0], upsert_key=upsert_key, strategy=strategy)  # type: ignore[arg-type]
    out = run(m, events)
    assert out == expected
    assert upsert_sink(out, pk=0) == {1: B}
    assert m.history((1,)) == [B]


def test_without_the_materializer_the_naive_sink_loses_the_row() -> None:
    # the failure the blog describes: applying the shuffled input directly deletes id=1
    events, _ = BLOG_ORDERS["update before last"]
    assert upsert_sink([[e] for e in events], pk=0) == {}


# --- the talk (slides 14-18): OrderSink(id, user_id, username), PK id ---
U2, U1 = (1, 12, "u2"), (1, 11, "u1")


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("upsert_key", [None, [0, 1]])
def test_talk_slides_16_to_18(strategy: str, upsert_key: list[int] | None) -> None:
    m = UpsertMaterializer(primary_key=[0], upsert_key=upsert_key, strategy=strategy)  # type: ignore[arg-type]
    assert m.process("+U", U2) == [("+I", U2)]   # slide 16: insert
    assert m.process("+I", U1) == [("+U", U1)]   # slide 17: 12 -> 11, u2 -> u1
    assert m.process("-U", U1) == [("+U", U2)]   # slide 18: rolled back to 12, u2
    assert upsert_sink([[("+I", U2)], [("+U", U1)], [("+U", U2)]], pk=0) == {1: U2}


# --- Flink's SinkUpsertMaterializerTest example: no upsert key, PK column 1 ---
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_retracting_a_non_last_row_emits_nothing(strategy: str) -> None:
    a1, a2, a3 = (1, 1, "a1"), (2, 1, "a2"), (3, 1, "a3")
    m = UpsertMaterializer(primary_key=[1], upsert_key=None, strategy=strategy, ttl_ms=None,  # type: ignore[arg-type]
                           threshold_high=None, threshold_low=None)
    assert run(m, [("+I", a1), ("+I", a2), ("+I", a3), ("-D", a2), ("-D", a3), ("-D", a1)]) == [
        [("+I", a1)], [("+U", a2)], [("+U", a3)], [], [("+U", a1)], [("-D", a1)]]
    assert m.history((1,)) == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_duplicates_without_upsert_key_are_a_multiset(strategy: str) -> None:
    a = (1, 1, "a")
    m = UpsertMaterializer(primary_key=[1], strategy=strategy)  # type: ignore[arg-type]
    assert run(m, [("+I", a), ("+I", a), ("-D", a), ("-D", a)]) == [[("+I", a)], [("+U", a)], [], [("-D", a)]]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_upsert_key_replaces_in_place_and_delete_returns_the_retraction_row(strategy: str) -> None:
    k1, k2, k1b = (1, 7, "a"), (2, 7, "b"), (1, 7, "a-new")
    m = UpsertMaterializer(primary_key=[1], upsert_key=[0], strategy=strategy)  # type: ignore[arg-type]
    assert m.process("+I", k1) == [("+I", k1)]
    assert m.process("+I", k2) == [("+U", k2)]
    assert m.process("+U", k1b) == [("+U", k1b)]      # forwarded although it is not the newest element
    assert m.history((7,)) == [k1b, k2]               # position kept
    assert m.process("-U", k2) == [("+U", k1b)]       # newest removed: roll back
    stale = (1, 7, "what the retraction carries")
    assert m.process("-D", stale) == [("-D", stale)]  # matched by upsert key; emits the row as received


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_retraction_of_an_unknown_row_is_counted_and_logged(strategy: str, caplog: pytest.LogCaptureFixture) -> None:
    m = UpsertMaterializer(primary_key=[0], strategy=strategy)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO, logger="tablestore.materializer.upsert")
    assert m.process("-D", (1, "x")) == []
    m.process("+I", (1, "a"))
    assert m.process("-U", (1, "b")) == []
    assert m.state_cleared_count == 2
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2
    expected = "state is cleared" if strategy == "LEGACY" else "Not found record to retract"
    assert all(expected in msg for msg in messages)
    assert m.history((1,)) == [(1, "a")]


# --- TTL ---
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_whole_history_expired_then_delete_emits_nothing(strategy: str) -> None:
    # Flink's test: write at t=1, ttl 1000, delete at t=1002 -> nothing (and counted as state cleared)
    m = UpsertMaterializer(primary_key=[0], strategy=strategy, ttl_ms=1000)  # type: ignore[arg-type]
    assert m.process("+I", (1, "a"), now_ms=1) == [("+I", (1, "a"))]
    assert m.process("-D", (1, "a"), now_ms=1002) == []
    assert m.state_cleared_count == 1
    assert m.process("+I", (1, "b"), now_ms=1003) == [("+I", (1, "b"))]   # history empty again


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_not_yet_expired_history_is_kept(strategy: str) -> None:
    m = UpsertMaterializer(primary_key=[0], strategy=strategy, ttl_ms=1000)  # type: ignore[arg-type]
    m.process("+I", (1, "a"), now_ms=1)
    assert m.process("-D", (1, "a"), now_ms=1000) == [("-D", (1, "a"))]   # 1 + 1000 > 1000: alive


def test_legacy_ttl_is_per_key_the_others_per_entry() -> None:
    a1, a2 = (1, 1, "a1"), (2, 1, "a2")
    events = [("+I", a1, 0), ("+I", a2, 900), ("-D", a2, 1500)]
    legacy = UpsertMaterializer(primary_key=[1], strategy="LEGACY", ttl_ms=1000)
    assert run(legacy, events)[-1] == [("+U", a1)]          # the list was written at 900: all alive
    for strategy in ("VALUE", "MAP", "ADAPTIVE"):
        m = UpsertMaterializer(primary_key=[1], strategy=strategy, ttl_ms=1000)  # type: ignore[arg-type]
        assert run(m, events)[-1] == [("-D", a2)], strategy  # a1 (written at 0) expired at 1000
        assert m.expired_count == 1


def test_legacy_ttl_is_refreshed_by_writes_only() -> None:
    m = UpsertMaterializer(primary_key=[1], strategy="LEGACY", ttl_ms=100)
    run(m, [("+I", (1, 0, "a"), 0), ("+I", (2, 0, "a"), 0), ("-D", (2, 0, "a"), 90)])  # a found retraction writes
    assert m.process("+I", (3, 0, "a"), now_ms=150) == [("+U", (3, 0, "a"))]          # alive: written at 90
    other = UpsertMaterializer(primary_key=[1], strategy="LEGACY", ttl_ms=100)
    run(other, [("+I", (1, 0, "a"), 0), ("-D", (9, 0, "unknown"), 90)])                 # a miss does not write
    assert other.process("+I", (3, 0, "a"), now_ms=150) == [("+I", (3, 0, "a"))]      # expired at 100


@pytest.mark.parametrize("strategy", ["VALUE", "MAP", "ADAPTIVE"])
def test_cleanup_drops_from_the_front_only(strategy: str) -> None:
    m = UpsertMaterializer(primary_key=[1], upsert_key=[0], strategy=strategy, ttl_ms=1000,  # type: ignore[arg-type]
                           threshold_high=2, threshold_low=1)
    k1, k2, k1b, k3 = (1, 5, "a"), (2, 5, "b"), (1, 5, "a2"), (3, 5, "c")
    run(m, [("+I", k1, 0), ("+I", k2, 500), ("+U", k1b, 900), ("+I", k3, 1200)])
    assert m.history_timestamps((5,)) == [900, 500, 1200]
    assert m.cleanup(1600) == 0                # k2 expired but sits behind k1b, which is alive
    assert m.history((5,)) == [k1b, k2, k3]
    assert m.cleanup(1900) == 2                # k1b and then k2
    assert m.history((5,)) == [k3]
    assert m.cleanup(2200) == 1
    assert m.history((5,)) == [] and m.keys() == []
    if strategy != "VALUE":
        large = m.multiset if isinstance(m.multiset, LinkedMultiSet) else m.multiset.large  # type: ignore[attr-defined]
        assert large.size(b"") == 0


def test_map_cleanup_keeps_the_three_structures_consistent() -> None:
    m = UpsertMaterializer(primary_key=[0], strategy="MAP", ttl_ms=100)
    history = m.multiset
    assert isinstance(history, LinkedMultiSet)
    rows = [(1, i % 3) for i in range(9)]          # repeated rows: occurrence chains per ident
    for t, r in enumerate(rows):
        m.process("+I", r, now_ms=t * 10)
    key = m.multiset.keys().__iter__().__next__()
    for now in (100, 130, 155):
        m.cleanup(now)
        history.check(key)
        assert m.history((1,)) == [r for t, r in enumerate(rows) if t * 10 + 100 > now]
    assert m.history((1,)) == [(1, 0), (1, 1), (1, 2)]
    assert m.process("-D", (1, 1), now_ms=155) == []                  # its older copies expired: this one goes
    assert m.process("-D", (1, 1), now_ms=155) == []                  # none left: state cleared
    assert m.state_cleared_count == 1
    assert m.process("-D", (1, 2), now_ms=155) == [("+U", (1, 0))]
    history.check(key)
    assert m.process("-D", (1, 0), now_ms=180) == []                  # written at 60: expired by now
    assert m.keys() == []
    history.check(key)


# --- ADAPTIVE switching (SequencedMultiSetStateTest#testAdaptivity) ---
@pytest.mark.parametrize("high,low", [(1, 0), (2, 1), (10, 0), (10, 9)])
def test_adaptive_switches_at_the_thresholds(high: int, low: int) -> None:
    m = UpsertMaterializer(primary_key=[0], strategy="ADAPTIVE", threshold_high=high, threshold_low=low)
    adaptive = m.multiset
    assert isinstance(adaptive, AdaptiveMultiSet)
    rows = [(0, i) for i in range(high + 3)]
    for n, r in enumerate(rows, start=1):
        m.process("+I", r)
        assert adaptive.uses_large(m._pk.encode(r)) == (n >= high)
    key = m._pk.encode(rows[0])
    for n, r in enumerate(rows[:-1], start=1):          # FIFO removal
        m.process("-D", r)
        size = len(rows) - n
        assert adaptive.uses_large(key) == (size > low), (n, size)
        assert m.history((0,)) == rows[n:]              # order kept across switches


def test_thresholds_default_by_backend_type() -> None:
    from tablestore.materializer import InMemoryStateBackend
    heap = UpsertMaterializer(primary_key=[0], strategy="ADAPTIVE")
    assert (heap.options.threshold_high, heap.options.threshold_low) == (400, 300)
    rocks = UpsertMaterializer(primary_key=[0], strategy="ADAPTIVE",
                               backend=InMemoryStateBackend(type_identifier="rocksdb"))
    assert (rocks.options.threshold_high, rocks.options.threshold_low) == (50, 40)


def test_bad_options_and_kinds_raise() -> None:
    with pytest.raises(InvalidOptionError, match="upsert-materialize.strategy"):
        UpsertMaterializer(primary_key=[0], strategy="FAST")  # type: ignore[arg-type]
    with pytest.raises(InvalidOptionError):
        UpsertMaterializer(primary_key=[0], strategy="ADAPTIVE", threshold_high=5, threshold_low=5)
    m = UpsertMaterializer(primary_key=[0])
    with pytest.raises(InvalidRowKindError):
        m.process("+X", (1, 2))
    m.process("+I", (1, 2))
    with pytest.raises(MaterializerError, match="expected 2 columns"):
        m.process("+I", (1, 2, 3))
    with pytest.raises(MaterializerError, match="pass row_types"):
        m.process("+I", ("one", 2))
    with pytest.raises(MaterializerError, match="outside a row"):
        UpsertMaterializer(primary_key=[5]).process("+I", (1, 2))
