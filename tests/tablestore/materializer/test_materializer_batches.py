"""Arrow batches, row identity, options and the state blob of the upsert materializer."""
from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tablestore.materializer import (
    STRATEGY_KEY, THRESHOLD_HIGH_KEY, THRESHOLD_LOW_KEY, TTL_KEY, CorruptStateError, InMemoryStateBackend,
    InvalidOptionError, InvalidRowKindError, MaterializeOptions, MaterializerError, RowShapeError,
    UpsertMaterializer,
)
from tablestore.materializer.errors import MaterializerError as Root
from tablestore.errors import TableStoreError

STRATEGIES = ["LEGACY", "VALUE", "MAP", "ADAPTIVE"]


@settings(max_examples=100, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from(["+I", "+U", "-U", "-D"]), st.integers(0, 3),
                                 st.integers(0, 1), st.sampled_from(["a", "b"])), max_size=40),
       strategy=st.sampled_from(STRATEGIES), upsert=st.booleans())
def test_process_batch_equals_process_per_event(events: list[tuple[str, int, int, str]], strategy: str,
                                                upsert: bool) -> None:
    uk = [0] if upsert else None
    one = UpsertMaterializer(primary_key=[1], upsert_key=uk, strategy=strategy,  # type: ignore[arg-type]
                             threshold_high=3, threshold_low=1)
    expected = [c for k, a, b, p in events for c in one.process(k, (a, b, p))]
    # _row_kind in the middle of the schema; narrow integer types survive the round trip
    table = pa.table({"id": pa.array([e[1] for e in events], pa.int32()),
                      "_row_kind": pa.array([e[0] for e in events], pa.string()),
                      "pk": pa.array([e[2] for e in events], pa.int8()),
                      "payload": pa.array([e[3] for e in events], pa.string())})
    batched = UpsertMaterializer(primary_key=[1], upsert_key=uk, strategy=strategy,  # type: ignore[arg-type]
                                 threshold_high=3, threshold_low=1)
    half = len(events) // 2
    out = pa.concat_tables([batched.process_batch(table.slice(0, half)), batched.process_batch(table.slice(half))])
    assert out.schema == table.schema
    got = list(zip(out.column("_row_kind").to_pylist(),
                   zip(out.column("id").to_pylist(), out.column("pk").to_pylist(), out.column("payload").to_pylist())))
    assert got == expected


def test_batch_errors() -> None:
    m = UpsertMaterializer(primary_key=[0])
    with pytest.raises(InvalidRowKindError):
        m.process_batch(pa.table({"_row_kind": ["+I", "X"], "a": [1, 2]}))
    with pytest.raises(RowShapeError, match="_row_kind"):
        m.process_batch(pa.table({"a": [1, 2]}))
    with pytest.raises(RowShapeError, match="string"):
        m.process_batch(pa.table({"_row_kind": [1], "a": [1]}))
    empty = m.process_batch(pa.table({"_row_kind": pa.array([], pa.string()), "a": pa.array([], pa.int64())}))
    assert empty.num_rows == 0


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_identity_is_binary_equality_of_the_key_codec(strategy: str) -> None:
    m = UpsertMaterializer(primary_key=[0], strategy=strategy)  # type: ignore[arg-type]
    m.process("+I", (1, 0.0))
    assert m.process("-D", (1, -0.0)) == []          # -0.0 is another row than 0.0 (binary equality)
    m.process("+I", (2, float("nan")))
    ((kind, (key, value)),) = m.process("-D", (2, float("nan")))      # NaN matches NaN
    assert kind == "-D" and key == 2 and math.isnan(value)


def test_types_learned_from_a_later_row_when_the_first_has_nulls() -> None:
    m = UpsertMaterializer(primary_key=[0], strategy="MAP")
    assert m.process("+I", (1, None)) == [("+I", (1, None))]
    assert m.process("+I", (1, "x")) == [("+U", (1, "x"))]
    assert m.process("-D", (1, None)) == []          # removes the older null row; the newest stays
    assert m.history((1,)) == [(1, "x")]


def test_declared_types_cover_decimals_dates_and_composite_keys() -> None:
    types = [pa.date32(), pa.decimal128(10, 2), pa.string(), pa.timestamp("us")]
    m = UpsertMaterializer(primary_key=[0, 2], upsert_key=[1], strategy="ADAPTIVE", row_types=types)
    d, ts = dt.date(2024, 1, 2), dt.datetime(2024, 1, 2, 3, 4, 5)
    assert m.process("+I", (d, Decimal("1.50"), "k", ts)) == [("+I", (d, Decimal("1.50"), "k", ts))]
    assert m.process("+I", (d, Decimal("2"), "k", ts)) == [("+U", (d, Decimal("2"), "k", ts))]
    assert m.process("-U", (d, Decimal("2.00"), "k", None)) == [("+U", (d, Decimal("1.50"), "k", ts))]
    assert m.keys() == [(d, "k")]
    with pytest.raises(RowShapeError):
        m.process("+I", (d, Decimal("0.001"), "k", ts))   # does not fit decimal(10, 2)


def test_unencodable_key_types_raise_a_materializer_error() -> None:
    with pytest.raises(RowShapeError, match="no key encoding"):   # the whole row identifies: lists are not keys
        UpsertMaterializer(primary_key=[0], row_types=[pa.int64(), pa.list_(pa.int64())])
    with pytest.raises(RowShapeError, match="no key encoding"):   # found out from the first row
        UpsertMaterializer(primary_key=[0]).process("+I", (1, [1, 2]))
    ok = UpsertMaterializer(primary_key=[0], upsert_key=[0], row_types=[pa.int64(), pa.list_(pa.int64())])
    assert ok.process("+I", (1, [1, 2])) == [("+I", (1, [1, 2]))]


def test_errors_form_one_tree_under_table_store_error() -> None:
    assert MaterializerError is Root and issubclass(Root, TableStoreError)
    for cls in (CorruptStateError, InvalidOptionError, RowShapeError):
        assert issubclass(cls, MaterializerError)
    # a bad row kind is the same error whether a table write or the materializer meets it
    import tablestore

    assert InvalidRowKindError is tablestore.InvalidRowKindError and issubclass(InvalidRowKindError, TableStoreError)


def test_options_parse_from_properties() -> None:
    props = {STRATEGY_KEY: "adaptive", THRESHOLD_HIGH_KEY: "20", THRESHOLD_LOW_KEY: "5", TTL_KEY: "60000"}
    assert MaterializeOptions.from_properties(props) == MaterializeOptions("ADAPTIVE", 20, 5, 60000)
    assert MaterializeOptions.from_properties({}, backend_type="rocksdb") == MaterializeOptions("LEGACY", 50, 40, None)
    assert MaterializeOptions.from_properties({TTL_KEY: "0"}).ttl_ms is None
    with pytest.raises(InvalidOptionError, match=THRESHOLD_LOW_KEY):
        MaterializeOptions.from_properties({THRESHOLD_LOW_KEY: "many"})


def test_state_blob_round_trip_and_corruption() -> None:
    backend = InMemoryStateBackend()
    m = UpsertMaterializer(primary_key=[0], strategy="MAP", backend=backend)
    for i in range(3):
        m.process("+I", (1, i))
    (key,) = backend.keys()
    blob = backend.export_key(key)
    assert blob is not None and backend.export_key(b"missing") is None
    other = InMemoryStateBackend()
    other.import_key(key, blob)
    resumed = UpsertMaterializer(primary_key=[0], strategy="MAP", backend=other)
    assert resumed.process("-D", (1, 2)) == [("+U", (1, 1))]
    with pytest.raises(CorruptStateError):
        other.import_key(key, b"\x09junk")
    with pytest.raises(CorruptStateError):
        other.import_key(key, b"\x01not a pickle")


def _ops(m: UpsertMaterializer, events: list[tuple[str, Any]]) -> list[Any]:
    return [m.process(k, r) for k, r in events]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_rows_given_as_lists_are_stored_as_tuples(strategy: str) -> None:
    m = UpsertMaterializer(primary_key=[0], strategy=strategy)  # type: ignore[arg-type]
    assert _ops(m, [("+I", [1, "a"]), ("-D", [1, "a"])]) == [[("+I", (1, "a"))], [("-D", (1, "a"))]]
