"""A log reader returns a valid changelog for its changelog mode (no broker needed: the decode step alone)."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from logstore import InvalidRowKindError, LogReader, LogStoreOptions, get_format

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
UPDATE = json.dumps({"before": {"id": 1, "v": "a"}, "after": {"id": 1, "v": "b"}, "op": "u"}).encode()
CREATE = json.dumps({"before": None, "after": {"id": 2, "v": "c"}, "op": "c"}).encode()


def reader(mode: str) -> LogReader:
    options = LogStoreOptions("t", 1, "debezium-json", "json", mode, "transactional")  # type: ignore[arg-type]
    return LogReader(options, get_format("debezium-json", SCHEMA, ["id"]))


def decoded(r: LogReader) -> list[tuple[str, int, str]]:
    batch = r.value_format.decode_batch([UPDATE, CREATE], [None, None]).batch
    out, kept = r._as_changelog(batch)
    assert kept is None or int(kept.sum()) == out.num_rows  # which rows were kept (their offsets go with them)
    return list(zip(out.column("_row_kind").to_pylist(), out.column("id").to_pylist(), out.column("v").to_pylist()))


def test_all_mode_keeps_every_change() -> None:
    assert decoded(reader("all")) == [("-U", 1, "a"), ("+U", 1, "b"), ("+I", 2, "c")]


def test_upsert_mode_is_an_upsert_stream_without_update_before() -> None:
    assert decoded(reader("upsert")) == [("+U", 1, "b"), ("+I", 2, "c")]


def test_a_bad_kind_from_a_decoder_is_caught_naming_the_topic() -> None:
    batch = pa.record_batch({"_row_kind": ["+I", "?"], "id": [1, 2], "v": ["a", "b"]})
    with pytest.raises(InvalidRowKindError, match=r"'t'.*\['\?'\]"):
        reader("all")._as_changelog(batch)
