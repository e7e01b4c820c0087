"""Property tests: every strategy gives the same output for every input, and that output is the oracle's."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from materializer_oracle import ReferenceMaterializer
from tablestore.materializer import InMemoryStateBackend, UpsertMaterializer
from tablestore.materializer.linked import LinkedMultiSet
from tablestore.materializer.multiset import AdaptiveMultiSet

STRATEGIES = ["LEGACY", "VALUE", "MAP", "ADAPTIVE"]
ROW_TYPES = [pa.int64(), pa.int64(), pa.string()]     # (upsert key, primary key, payload)
Row = tuple[Any, ...]
Event = tuple[str, Row, int]

# arbitrary events: any kind, any row (so retractions of unknown rows and duplicates happen), non-decreasing time
events_st = st.lists(
    st.tuples(st.sampled_from(["+I", "+U", "-U", "-D"]), st.integers(0, 3), st.integers(0, 1),
              st.sampled_from(["a", "b", ""]), st.integers(0, 60)),
    max_size=60,
).map(lambda raw: _timed(raw))


def _timed(raw: list[tuple[str, int, int, str, int]]) -> list[Event]:
    out, now = [], 0
    for kind, uk, pk, payload, step in raw:
        now += step
        out.append((kind, (uk, pk, payload), now))
    return out


def _materializers(upsert_key: list[int] | None, ttl: int | None, **kw: Any) -> dict[str, UpsertMaterializer]:
    made = {}
    for s in STRATEGIES:
        made[s] = UpsertMaterializer(primary_key=[1], upsert_key=upsert_key, strategy=s, ttl_ms=ttl,  # type: ignore[arg-type]
                                     threshold_high=3, threshold_low=1, row_types=ROW_TYPES, **kw)
    return made


def _check_map_invariants(m: UpsertMaterializer) -> None:
    history = m.multiset
    linked = history if isinstance(history, LinkedMultiSet) else getattr(history, "large", None)
    if isinstance(linked, LinkedMultiSet):
        for pk in (0, 1):
            linked.check(m._pk.encode((0, pk, "")))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(events=events_st, upsert=st.booleans(), serialize=st.booleans())
def test_all_strategies_equal_the_oracle_without_ttl(events: list[Event], upsert: bool, serialize: bool) -> None:
    uk = [0] if upsert else None
    ms = {s: UpsertMaterializer(primary_key=[1], upsert_key=uk, strategy=s,  # type: ignore[arg-type]
                                threshold_high=3, threshold_low=1, row_types=ROW_TYPES,
                                backend=InMemoryStateBackend(serialize=serialize)) for s in STRATEGIES}
    oracle = ReferenceMaterializer([1], uk)
    for kind, row, _ in events:
        expected = oracle.process(kind, row)
        for s, m in ms.items():
            assert m.process(kind, row) == expected, (s, kind, row)
    for s, m in ms.items():
        _check_map_invariants(m)
        assert m.state_cleared_count == oracle.cleared, s
        for pk in (0, 1):
            assert m.history((pk,)) == oracle.history((pk,)), s


@settings(max_examples=300, deadline=None)
@given(events=events_st, upsert=st.booleans(), ttl=st.integers(1, 120))
def test_ttl_legacy_per_key_and_the_others_per_entry(events: list[Event], upsert: bool, ttl: int) -> None:
    uk = [0] if upsert else None
    ms = _materializers(uk, ttl)
    by_key = ReferenceMaterializer([1], uk, ttl_ms=ttl, ttl_mode="key")
    by_entry = ReferenceMaterializer([1], uk, ttl_ms=ttl, ttl_mode="entry")
    for kind, row, now in events:
        want_key = by_key.process(kind, row, now)
        want_entry = by_entry.process(kind, row, now)
        assert ms["LEGACY"].process(kind, row, now) == want_key
        for s in ("VALUE", "MAP", "ADAPTIVE"):
            assert ms[s].process(kind, row, now) == want_entry, s
    for s, m in ms.items():
        _check_map_invariants(m)
        oracle = by_key if s == "LEGACY" else by_entry
        for pk in (0, 1):
            assert m.history((pk,)) == oracle.history((pk,)), s


@settings(max_examples=200, deadline=None)
@given(events=events_st, upsert=st.booleans(), ttl=st.integers(1, 120), sweeps=st.lists(st.integers(0, 59)))
def test_periodic_cleanup_never_changes_the_output(events: list[Event], upsert: bool, ttl: int,
                                                   sweeps: list[int]) -> None:
    uk = [0] if upsert else None
    lazy, swept = _materializers(uk, ttl), _materializers(uk, ttl)
    for i, (kind, row, now) in enumerate(events):
        for s in STRATEGIES:
            if i in sweeps:
                swept[s].cleanup(now)
                _check_map_invariants(swept[s])
            assert swept[s].process(kind, row, now) == lazy[s].process(kind, row, now), s


@settings(max_examples=200, deadline=None)
@given(events=events_st)
def test_the_sink_always_holds_the_newest_row_of_the_history(events: list[Event]) -> None:
    # without upsert key and TTL, applying the output as upserts keeps exactly the history's last row per key
    for s, m in _materializers(None, None).items():
        sink: dict[int, Row] = {}
        for kind, row, _ in events:
            for out_kind, out_row in m.process(kind, row):
                assert out_kind in ("+I", "+U", "-D")
                if out_kind == "-D":
                    sink.pop(out_row[1], None)
                else:
                    sink[out_row[1]] = out_row
            history = m.history((row[1],))
            assert sink.get(row[1]) == (history[-1] if history else None), s


@st.composite
def shuffled_changelog(draw: st.DrawFn) -> tuple[list[Event], dict[int, Row]]:
    """Per primary key a correct changelog (+I v0, -U v0, +U v1, ..., maybe -D), shuffled so that each row's
    ADD still comes before its RETRACT (the only order the shuffle preserves, per the blog)."""
    chains: list[list[tuple[str, Row]]] = []
    final: dict[int, Row] = {}
    for pk in range(draw(st.integers(1, 3))):
        versions = draw(st.integers(1, 5))
        deleted = draw(st.booleans())
        for v in range(versions):
            row = (v, pk, f"v{v}")
            add = "+I" if v == 0 else "+U"
            if v < versions - 1:
                chains.append([(add, row), ("-U", row)])
            elif deleted:
                chains.append([(add, row), ("-D", row)])
            else:
                chains.append([(add, row)])
                final[pk] = row
    out: list[Event] = []
    while chains:
        i = draw(st.integers(0, len(chains) - 1))
        out.append((*chains[i].pop(0), 0))
        if not chains[i]:
            chains.pop(i)
    return out, final


@settings(max_examples=300, deadline=None)
@given(case=shuffled_changelog(), upsert=st.booleans())
def test_shuffled_changelog_ends_correct_in_an_upsert_sink(case: tuple[list[Event], dict[int, Row]],
                                                           upsert: bool) -> None:
    events, final = case
    for s, m in _materializers([0] if upsert else None, None).items():
        sink: dict[int, Row] = {}
        for kind, row, _ in events:
            for out_kind, out_row in m.process(kind, row):
                if out_kind == "-D":
                    sink.pop(out_row[1], None)
                else:
                    sink[out_row[1]] = out_row
        assert sink == final, s
        assert m.state_cleared_count == 0


@settings(max_examples=150, deadline=None)
@given(events=events_st, upsert=st.booleans(), cuts=st.lists(st.integers(0, 60), max_size=6))
def test_state_exported_per_key_between_micro_batches_resumes_identically(
        events: list[Event], upsert: bool, cuts: list[int]) -> None:
    uk = [0] if upsert else None
    for s in STRATEGIES:
        straight = UpsertMaterializer(primary_key=[1], upsert_key=uk, strategy=s, ttl_ms=50,  # type: ignore[arg-type]
                                      threshold_high=3, threshold_low=1)
        expected = [straight.process(k, r, now) for k, r, now in events]
        store: dict[bytes, bytes] = {}     # what a Spark state store would hold: one blob per key
        got: list[list[tuple[str, Row]]] = []
        bounds = sorted({0, len(events), *[c for c in cuts if c < len(events)]})
        for lo, hi in zip(bounds, bounds[1:]):
            backend = InMemoryStateBackend(serialize=True)
            for key, blob in store.items():
                backend.import_key(key, blob)
            m = UpsertMaterializer(primary_key=[1], upsert_key=uk, strategy=s, ttl_ms=50,  # type: ignore[arg-type]
                                   threshold_high=3, threshold_low=1, row_types=ROW_TYPES, backend=backend)
            got.extend(m.process(k, r, now) for k, r, now in events[lo:hi])
            store = {k: b for k in backend.keys() if (b := backend.export_key(k)) is not None}
        assert got == expected, s


def test_adaptive_large_histories_really_use_the_map_layout() -> None:
    m = UpsertMaterializer(primary_key=[1], strategy="ADAPTIVE", threshold_high=3, threshold_low=1,
                           row_types=ROW_TYPES)
    for i in range(5):
        m.process("+I", (i, 0, "x"))
    adaptive = m.multiset
    assert isinstance(adaptive, AdaptiveMultiSet)
    assert adaptive.uses_large(m._pk.encode((0, 0, "")))
    assert isinstance(adaptive.large, LinkedMultiSet)
    adaptive.large.check(m._pk.encode((0, 0, "")))


class _CountingBackend(InMemoryStateBackend):
    """Counts every state call the algorithms make."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def value_state(self, name: str) -> Any:
        return _Counting(super().value_state(name), self)

    def map_state(self, name: str) -> Any:
        return _Counting(super().map_state(name), self)


class _Counting:
    def __init__(self, inner: Any, owner: _CountingBackend) -> None:
        self._inner, self._owner = inner, owner

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._inner, name)

        def counted(*args: Any) -> Any:
            self._owner.calls += 1
            return target(*args)
        return counted


def test_map_state_calls_per_event_do_not_grow_with_the_history() -> None:
    per_event = {}
    for size in (10, 1000):
        for upsert in (False, True):
            backend = _CountingBackend()
            m = UpsertMaterializer(primary_key=[1], upsert_key=[0] if upsert else None, strategy="MAP",
                                   row_types=ROW_TYPES, backend=backend)
            for i in range(size):
                m.process("+I", (i, 0, "p"))
            backend.calls = 0
            m.process("+I", (size, 0, "p"))       # append
            m.process("-D", (size, 0, "p"))       # remove the newest
            m.process("-D", (size // 2, 0, "p"))  # remove one in the middle
            per_event[(size, upsert)] = backend.calls
    assert per_event[(10, False)] == per_event[(1000, False)] <= 3 * 10
    assert per_event[(10, True)] == per_event[(1000, True)] <= 3 * 10
