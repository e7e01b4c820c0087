"""Bad messages: skipped and counted with ignore-parse-errors, otherwise a LogFormatError naming where they came from."""
from __future__ import annotations

import pyarrow as pa
import pytest

from logstore.changes import RowKind
from logstore.errors import LogFormatError, LogStoreError
from logstore.formats import AvroSchemaRegistry, MessageRef, get_format

SCHEMA = pa.schema([("id", pa.int32()), ("v", pa.string()), ("ts", pa.timestamp("ms"))])
GOOD = b'{"before":null,"after":{"id":1,"v":"a","ts":"2024-01-02 03:04:05.006"},"op":"c"}'
GOOD2 = b'{"before":{"id":2,"v":"b","ts":null},"after":null,"op":"d"}'
BAD_JSON = [
    (b"{not json", "corrupt"),
    (b"[1, 2]", "not a JSON object"),
    (b'{"before":null,"after":null,"op":"t"}', 'unknown "op" value'),
    (b'{"before":null,"after":7,"op":"c"}', "not an object"),
    (b'{"before":null,"after":{"id":"abc","v":"x"},"op":"c"}', "not a valid int32"),
    (b'{"before":null,"after":{"id":1,"ts":"yesterday"},"op":"r"}', "not a valid timestamp"),
    (b'{"before":null,"after":{"id":1,"v":"x"},"op":"d"}', 'The "before" field of DELETE message is null'),
]
REFS = [MessageRef("orders", 3, 100 + i) for i in range(3)]


@pytest.mark.parametrize(("bad", "reason"), BAD_JSON)
def test_bad_debezium_json_raises_with_topic_partition_offset(bad: bytes, reason: str) -> None:
    fmt = get_format("debezium-json", SCHEMA, ["id"])
    with pytest.raises(LogFormatError, match=reason) as info:
        fmt.decode_batch([GOOD, bad, GOOD2], None, REFS)
    assert isinstance(info.value, LogStoreError)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("orders", 3, 101)


@pytest.mark.parametrize(("bad", "reason"), BAD_JSON)
def test_bad_debezium_json_skipped_and_counted(bad: bytes, reason: str) -> None:
    fmt = get_format("debezium-json", SCHEMA, ["id"], {"debezium-json.ignore-parse-errors": "true"})
    decoded = fmt.decode_batch([GOOD, bad, GOOD2, bad], None, None)
    assert decoded.batch.column("id").to_pylist() == [1, 2]
    assert decoded.batch.column("_row_kind").to_pylist() == ["+I", "-D"]
    assert decoded.messages.tolist() == [0, 2]
    assert decoded.skipped == [1, 3]
    assert fmt.parse_errors == 2


def test_upsert_bad_messages() -> None:
    fmt = get_format("upsert", SCHEMA, ["id"])
    with pytest.raises(LogFormatError, match="tombstone without key") as info:
        fmt.decode(None, None, MessageRef("t", 0, 5))
    assert info.value.offset == 5
    with pytest.raises(LogFormatError, match="JSON object"):
        fmt.decode(b'"x"', b'{"id":1}')
    lenient = get_format("upsert", SCHEMA, ["id"], {"upsert.ignore-parse-errors": "true"})
    decoded = lenient.decode_batch([None, b'{"id":1,"v":"a"}', b"{{"], [None, b'{"id":1}', b'{"id":2}'])
    assert decoded.batch.to_pylist() == [{"_row_kind": "+U", "id": 1, "v": "a", "ts": None}]
    assert lenient.parse_errors == 2


def test_avro_bad_header_unknown_schema_and_truncated_body() -> None:
    fmt = get_format("debezium-avro", SCHEMA, ["id"])
    good = fmt.encode(RowKind.INSERT, {"id": 1, "v": "a", "ts": None})
    assert good is not None
    other = get_format("debezium-avro", pa.schema([("id", pa.int64())]), ["id"], registry=AvroSchemaRegistry())
    foreign = other.encode(RowKind.INSERT, {"id": 1})
    assert foreign is not None
    cases = [(b"\x00\x01" + good[2:], "single-object"), (foreign, "not in the registry"), (good[:-3], "does not decode")]
    for bad, reason in cases:
        with pytest.raises(LogFormatError, match=reason):
            fmt.decode(bad, None, MessageRef("t", 1, 9))
    lenient = get_format("debezium-avro", SCHEMA, ["id"], {"debezium-avro.ignore-parse-errors": "true"})
    decoded = lenient.decode_batch([bad for bad, _ in cases] + [good])
    assert decoded.batch.column("id").to_pylist() == [1] and lenient.parse_errors == 3


def test_bad_options_and_kinds_are_rejected() -> None:
    with pytest.raises(LogFormatError, match="unknown option"):
        get_format("debezium-json", SCHEMA, ["id"], {"debezium-json.schema-includes": "true"})
    with pytest.raises(LogFormatError, match="true or false"):
        get_format("debezium-json", SCHEMA, ["id"], {"debezium-json.ignore-parse-errors": "yes"})
    with pytest.raises(LogFormatError, match="unknown option"):
        get_format("debezium-avro", SCHEMA, ["id"], {"debezium-avro.schema-include": "true"})
    with pytest.raises(LogFormatError, match="unknown log format"):
        get_format("canal-json", SCHEMA, ["id"])
    with pytest.raises(LogFormatError, match="primary key"):
        get_format("upsert", SCHEMA, [])
    with pytest.raises(LogFormatError, match="not supported"):
        get_format("debezium-json", pa.schema([("l", pa.map_(pa.string(), pa.int32()))]), [])
    with pytest.raises(LogFormatError, match="not a valid Avro name"):
        get_format("debezium-avro", pa.schema([("bad-name", pa.int32())]), [])
    fmt = get_format("debezium-json", SCHEMA, ["id"])
    batch = pa.RecordBatch.from_pylist([{"id": 1, "v": "a", "ts": None, "_row_kind": "+X"}])
    with pytest.raises(LogFormatError, match="invalid _row_kind"):
        fmt.encode_batch(batch)
    with pytest.raises(LogFormatError, match="writes no record"):
        get_format("upsert", SCHEMA, ["id"]).encode(RowKind.UPDATE_BEFORE, {"id": 1})
