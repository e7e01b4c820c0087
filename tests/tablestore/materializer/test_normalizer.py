"""ChangelogNormalize (Flink's ProcTimeDeduplicateKeepLastRowFunction on a changelog), reference notes §3."""
from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablestore.materializer import ChangelogNormalizer, InvalidRowKindError

Row = tuple[Any, ...]


def test_contract_example() -> None:
    n = ChangelogNormalizer(key=[0], generate_update_before=True, state_ttl_ms=None)
    assert n.process("+U", (1, "a"), now_ms=None) == [("+I", (1, "a"))]


@pytest.mark.parametrize("gub", [True, False])
def test_upserts_become_a_full_changelog(gub: bool) -> None:
    n = ChangelogNormalizer(key=[0], generate_update_before=gub)
    assert n.process("+I", (1, "a")) == [("+I", (1, "a"))]
    assert n.process("+U", (1, "b")) == ([("-U", (1, "a"))] if gub else []) + [("+U", (1, "b"))]
    assert n.process("+I", (2, "x")) == [("+I", (2, "x"))]        # other keys are independent
    assert n.process("-D", (1, "b")) == [("-D", (1, "b"))]
    assert n.process("+U", (1, "c")) == [("+I", (1, "c"))]        # after a delete the key starts afresh


def test_duplicate_upserts_are_swallowed_without_ttl() -> None:
    n = ChangelogNormalizer(key=[0])
    assert n.process("+I", (1, "a")) == [("+I", (1, "a"))]
    assert n.process("+U", (1, "a")) == []       # same content, kind ignored
    assert n.process("+I", (1, "a")) == []
    assert n.process("+U", (1, "b")) == [("-U", (1, "a")), ("+U", (1, "b"))]


def test_duplicates_are_re_emitted_with_ttl() -> None:
    n = ChangelogNormalizer(key=[0], generate_update_before=False, state_ttl_ms=1000)
    assert n.process("+I", (1, "a"), now_ms=0) == [("+I", (1, "a"))]
    assert n.process("+U", (1, "a"), now_ms=10) == [("+U", (1, "a"))]


def test_deletes_emit_the_stored_row_and_deletes_of_missing_keys_nothing() -> None:
    n = ChangelogNormalizer(key=[0])
    assert n.process("-D", (9, None)) == []              # never seen
    n.process("+I", (1, "a"))
    assert n.process("-D", (1, None)) == [("-D", (1, "a"))]   # key-only delete: the full stored row goes out
    assert n.process("-D", (1, None)) == []              # already gone
    n.process("+I", (2, "z"))
    assert n.process("-U", (2, "stale")) == [("-D", (2, "z"))]  # -U is a delete of the stored row


def test_ttl_expiry_forgets_the_row() -> None:
    n = ChangelogNormalizer(key=[0], generate_update_before=True, state_ttl_ms=1000)
    n.process("+I", (1, "a"), now_ms=1)
    assert n.process("+U", (1, "b"), now_ms=1000) == [("-U", (1, "a")), ("+U", (1, "b"))]   # written at 1: alive
    assert n.process("+U", (1, "c"), now_ms=2000) == [("+I", (1, "c"))]     # written at 1000: expired at 2000
    assert n.process("-D", (1, None), now_ms=3000) == []                    # expired again
    n.process("+I", (2, "x"), now_ms=3000)
    n.process("+I", (3, "y"), now_ms=3500)
    assert n.cleanup(4000) == 1 and n.current((2,)) is None and n.current((3,)) == (3, "y")


def test_composite_key_and_bad_kind() -> None:
    n = ChangelogNormalizer(key=[0, 2])
    assert n.process("+I", (1, "a", 1)) == [("+I", (1, "a", 1))]
    assert n.process("+I", (1, "b", 2)) == [("+I", (1, "b", 2))]
    assert n.process("+U", (1, "c", 1)) == [("-U", (1, "a", 1)), ("+U", (1, "c", 1))]
    with pytest.raises(InvalidRowKindError):
        n.process("D", (1, "a", 1))


class _ReferenceNormalize:
    """§3.2's pseudo-code, literally, over a dict (no TTL)."""

    def __init__(self, gub: bool) -> None:
        self.gub, self.state = gub, {}  # type: ignore[var-annotated]

    def process(self, kind: str, row: Row) -> list[tuple[str, Row]]:
        pre = self.state.get(row[0])
        if kind in ("+I", "+U"):
            if pre is None:
                out = [("+I", row)]
            elif pre == row:
                return []
            else:
                out = ([("-U", pre)] if self.gub else []) + [("+U", row)]
            self.state[row[0]] = row
            return out
        if pre is not None:
            del self.state[row[0]]
            return [("-D", pre)]
        return []


@settings(max_examples=200, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from(["+I", "+U", "-U", "-D"]), st.integers(0, 2),
                                 st.sampled_from(["a", "b", None])), max_size=40), gub=st.booleans())
def test_matches_the_reference_and_batches_equal_events(events: list[tuple[str, int, str | None]], gub: bool) -> None:
    n = ChangelogNormalizer(key=[0], generate_update_before=gub, row_types=[pa.int64(), pa.string()])
    ref = _ReferenceNormalize(gub)
    expected: list[tuple[str, Row]] = []
    for kind, k, v in events:
        want = ref.process(kind, (k, v))
        assert n.process(kind, (k, v)) == want
        expected.extend(want)
    table = pa.table({"_row_kind": [e[0] for e in events], "k": [e[1] for e in events],
                      "v": pa.array([e[2] for e in events], pa.string())})
    batched = ChangelogNormalizer(key=[0], generate_update_before=gub).process_batch(table)
    assert batched.schema == table.schema
    assert list(zip(batched.column("_row_kind").to_pylist(),
                    zip(batched.column("k").to_pylist(), batched.column("v").to_pylist()))) == expected
