"""The flush's row gather (filestore.gather): the same rows as Arrow's `take`, for every column type it prepares."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from filestore.gather import GatherSource

_TEXT = st.one_of(st.none(), st.text(max_size=3), st.text(min_size=10, max_size=30))  # inline and out-of-line views


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(_TEXT, min_size=1, max_size=60),
    picks=st.lists(st.integers(min_value=0, max_value=10_000), max_size=80),
    start=st.integers(min_value=0, max_value=5),
    chunks=st.integers(min_value=1, max_value=3),
)
def test_take_equals_arrows_take(values: list[str | None], picks: list[int], start: int, chunks: int) -> None:
    n = len(values)
    strings = pa.array(values, pa.string())
    table = pa.table({
        "id": pa.array(np.arange(n, dtype=np.int64)),
        "s": strings,
        "ls": strings.cast(pa.large_string()),
        "b": strings.cast(pa.binary()),
        "lb": strings.cast(pa.large_binary()),
        "x": pa.array([None if v is None else len(v) for v in values], pa.float64()),
    }).slice(min(start, n - 1))  # a column that starts at an offset into its buffers
    pieces = [table.slice(i * table.num_rows // chunks, table.num_rows // chunks + 1) for i in range(chunks)]
    table = pa.concat_tables(pieces).slice(0, table.num_rows) if chunks > 1 else table  # several chunks
    idx = np.array([p % table.num_rows for p in picks], dtype=np.int64)
    taken = GatherSource(table, min_rows=0).take(idx)
    assert taken.schema == table.schema
    assert taken.equals(pc.take(table, pa.array(idx)))


def test_a_small_input_is_taken_as_it_is() -> None:
    table = pa.table({"s": ["a", None, "a much longer value than twelve bytes"]})
    assert GatherSource(table).take(np.array([2, 0, 1])).column("s").to_pylist() == [
        "a much longer value than twelve bytes", "a", None]
