"""Every log format reads back what it writes, for rows of every supported type (property tests)."""
from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.changes import ROW_KIND_COLUMN, RowKind
from logstore.formats import AvroSchemaRegistry, MessageRef, get_format, get_key_format

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("flag", pa.bool_()),
    pa.field("small", pa.int8()),
    pa.field("num", pa.int32()),
    pa.field("f32", pa.float32()),
    pa.field("f64", pa.float64()),
    pa.field("amount", pa.decimal128(18, 4)),
    pa.field("name", pa.string()),
    pa.field("blob", pa.binary()),
    pa.field("day", pa.date32()),
    pa.field("ts", pa.timestamp("us")),
    pa.field("ts_ms_utc", pa.timestamp("ms", "UTC")),
    pa.field("ts_ns", pa.timestamp("ns")),
    pa.field("ints", pa.list_(pa.int32())),
    pa.field("tags", pa.list_(pa.string())),
])
PK = ["id"]
UTC = dt.timezone.utc


def _opt(s: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | s


_naive = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
rows = st.fixed_dictionaries({
    "id": st.integers(-(2**63), 2**63 - 1),
    "flag": _opt(st.booleans()),
    "small": _opt(st.integers(-128, 127)),
    "num": _opt(st.integers(-(2**31), 2**31 - 1)),
    "f32": _opt(st.floats(width=32, allow_nan=False)),
    "f64": _opt(st.floats()),
    "amount": _opt(st.decimals(min_value=-(10**13), max_value=10**13, places=4, allow_nan=False)),
    "name": _opt(st.text(max_size=30)),
    "blob": _opt(st.binary(max_size=20)),
    "day": _opt(st.dates(min_value=dt.date(1, 1, 1))),
    "ts": _opt(_naive),
    "ts_ms_utc": _opt(_naive.map(lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=UTC))),
    "ts_ns": _opt(st.integers(-(2**62), 2**62)),  # nanoseconds since the epoch
    "ints": _opt(st.lists(_opt(st.integers(-(2**31), 2**31 - 1)), max_size=4)),   # PostgreSQL's int[]
    "tags": _opt(st.lists(_opt(st.text(max_size=8)), max_size=4)),
})
changes = st.lists(st.tuples(st.sampled_from(list(RowKind)), rows), max_size=12)


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """Row values in a form that compares equal across the round trip (NaN, ns timestamps)."""
    out = {}
    for k, v in row.items():
        if isinstance(v, float) and math.isnan(v):
            v = "NaN"
        elif k == "ts_ns" and v is not None and not isinstance(v, int):
            v = v.value  # pandas Timestamp -> ns since epoch
        elif isinstance(v, decimal.Decimal):
            v = v.normalize()
        out[k] = v
    return out


def _batch(items: list[tuple[RowKind, dict[str, Any]]]) -> pa.RecordBatch:
    data = [{**row, ROW_KIND_COLUMN: kind.value} for kind, row in items]
    schema = SCHEMA.append(pa.field(ROW_KIND_COLUMN, pa.string()))
    return pa.RecordBatch.from_pylist(data, schema=schema)


def _as_input(row: dict[str, Any]) -> dict[str, Any]:
    """What Arrow holds for the generated row (ns column given as integers)."""
    return _comparable(_batch([(RowKind.INSERT, row)]).to_pylist()[0] | {"ts_ns": row["ts_ns"]}) | {}


def _expected(fmt: str, items: list[tuple[RowKind, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    out = []
    for kind, row in items:
        full = {k: v for k, v in _as_input(row).items() if k != ROW_KIND_COLUMN}
        if fmt == "upsert":
            if kind is RowKind.UPDATE_BEFORE:
                continue
            if kind is RowKind.DELETE:
                out.append(("-D", {k: (full[k] if k in PK else None) for k in full}))
            else:
                out.append(("+U", full))
        else:
            out.append(("+I" if kind.is_addition else "-D", full))
    return out


FORMATS = [
    ("debezium-json", {}),
    ("debezium-json", {"debezium-json.schema-include": "true", "debezium-json.timestamp-format.standard": "ISO-8601"}),
    ("debezium-avro", {}),
    ("upsert", {}),
    ("upsert", {"upsert.timestamp-format.standard": "ISO-8601"}),
]


@pytest.mark.parametrize(("name", "options"), FORMATS)
@settings(max_examples=60, deadline=None)
@given(items=changes)
def test_batch_round_trip(name: str, options: dict[str, str], items: list[tuple[RowKind, dict[str, Any]]]) -> None:
    fmt = get_format(name, SCHEMA, PK, options, registry=AvroSchemaRegistry())
    keys = get_key_format("json", SCHEMA, PK)
    assert keys is not None
    batch = _batch(items)
    encoded = fmt.encode_batch(batch)
    key_bytes = keys.encode_batch(batch)
    assert len(encoded.rows) == len(encoded.values)
    decoded = fmt.decode_batch(encoded.values, [key_bytes[i] for i in encoded.rows])
    got = [(r.pop(ROW_KIND_COLUMN), _comparable(r)) for r in decoded.batch.to_pylist()]
    assert got == _expected(name, items)
    assert decoded.skipped == [] and fmt.parse_errors == 0
    assert decoded.batch.schema.names == [ROW_KIND_COLUMN, *SCHEMA.names]
    assert decoded.batch.schema.field("ts_ms_utc").type == pa.timestamp("ms", "UTC")


@pytest.mark.parametrize(("name", "options"), FORMATS)
@settings(max_examples=30, deadline=None)
@given(kind=st.sampled_from(list(RowKind)), row=rows)
def test_single_row_round_trip(name: str, options: dict[str, str], kind: RowKind, row: dict[str, Any]) -> None:
    fmt = get_format(name, SCHEMA, PK, options)
    keys = get_key_format("json", SCHEMA, PK)
    assert keys is not None
    if not fmt.writes(kind):
        assert name == "upsert" and kind is RowKind.UPDATE_BEFORE
        return
    value = fmt.encode(kind, row)
    assert (value is None) == (name == "upsert" and kind is RowKind.DELETE)
    key = keys.encode(row)
    got = [(k.value, _comparable(r)) for k, r in fmt.decode(value, key, MessageRef("t", 0, 7))]
    assert got == _expected(name, [(kind, row)])


@settings(max_examples=60, deadline=None)
@given(row=rows)
def test_json_key_round_trip_and_determinism(row: dict[str, Any]) -> None:
    keys = get_key_format("json", SCHEMA, ["id", "name"])
    assert keys is not None
    key = keys.encode(row)
    assert keys.decode(key) == {"id": row["id"], "name": row["name"]}
    assert keys.encode({**row, "num": 1, "f64": 2.0}) == key  # only key fields matter, bytes are stable


def test_no_key_format_without_primary_key() -> None:
    assert get_key_format("json", SCHEMA, []) is None


def test_debezium_json_writes_the_envelope_flink_writes() -> None:
    import json

    fmt = get_format("debezium-json", pa.schema([("id", pa.int32()), ("v", pa.string())]), ["id"],
                     {"debezium-json.source.connector": "tablestore"})
    ins = json.loads(fmt.encode(RowKind.INSERT, {"id": 1, "v": "a"}) or b"")
    upd_before = json.loads(fmt.encode(RowKind.UPDATE_BEFORE, {"id": 1, "v": "a"}) or b"")
    assert ins["before"] is None and ins["after"] == {"id": 1, "v": "a"} and ins["op"] == "c"
    assert upd_before["before"] == {"id": 1, "v": "a"} and upd_before["after"] is None and upd_before["op"] == "d"
    assert isinstance(ins["ts_ms"], int) and ins["source"] == {"connector": "tablestore"}
    assert "schema" not in ins


def test_schema_include_writes_connect_wrapper() -> None:
    import json

    fmt = get_format("debezium-json", pa.schema([("id", pa.int32()), ("v", pa.string())]), ["id"],
                     {"debezium-json.schema-include": "true"})
    msg = json.loads(fmt.encode(RowKind.DELETE, {"id": 1, "v": "a"}) or b"")
    assert set(msg) == {"schema", "payload"}
    assert msg["payload"]["op"] == "d"
    before = next(f for f in msg["schema"]["fields"] if f["field"] == "before")
    assert [(f["field"], f["type"]) for f in before["fields"]] == [("id", "int32"), ("v", "string")]


def test_upsert_drops_update_before_and_tombstones_deletes() -> None:
    schema = pa.schema([("id", pa.int32()), ("v", pa.string())])
    fmt = get_format("upsert", schema, ["id"])
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "v": "a", "_row_kind": k} for k in ("+I", "-U", "+U", "-D")],
        schema=schema.append(pa.field("_row_kind", pa.string())))
    encoded = fmt.encode_batch(batch)
    assert encoded.rows.tolist() == [0, 2, 3]
    assert encoded.values[0] == b'{"id":1,"v":"a"}' and encoded.values[2] is None
