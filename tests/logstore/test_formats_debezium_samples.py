"""Every real Debezium sample in tests/data/debezium decodes to the rows its README lists."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from logstore.errors import LogFormatError
from logstore.formats import MessageRef, get_format, get_key_format

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "debezium"
EXPECTED: dict[str, Any] = json.loads((SAMPLES / "expected_rows.json").read_text())

CUSTOMERS = pa.schema([("id", pa.int32()), ("first_name", pa.string()), ("last_name", pa.string()),
                       ("email", pa.string())])
PRODUCTS = pa.schema([("id", pa.int32()), ("name", pa.string()), ("description", pa.string()),
                      ("weight", pa.float64())])


def _schema(name: str) -> pa.Schema:
    return PRODUCTS if name.startswith(("08", "09", "10")) else CUSTOMERS


ROW_FILES = sorted(name for name, spec in EXPECTED.items() if "rows" in spec and name.endswith(".json"))


def test_every_sample_file_is_covered() -> None:
    listed = {n for n in EXPECTED if n.endswith(".json")} | {EXPECTED["06_mysql_tombstone"]["key_file"],
                                                             "06_mysql_tombstone_value_as_printed.json"}
    on_disk = {p.name for p in SAMPLES.glob("*.json")} - {"expected_rows.json"}
    assert on_disk == listed
    assert len(ROW_FILES) == 8


@pytest.mark.parametrize("name", ROW_FILES)
@pytest.mark.parametrize("schema_include", ["false", "true"])  # the wrapper is detected either way
def test_sample_decodes_to_expected_rows(name: str, schema_include: str) -> None:
    fmt = get_format("debezium-json", _schema(name), ["id"], {"debezium-json.schema-include": schema_include})
    got = [(kind.value, row) for kind, row in fmt.decode((SAMPLES / name).read_bytes())]
    assert got == [(kind, row) for kind, row in EXPECTED[name]["rows"]]


def test_sample_files_decode_as_one_batch() -> None:
    fmt = get_format("debezium-json", CUSTOMERS, ["id"])
    names = [n for n in ROW_FILES if _schema(n) is CUSTOMERS]
    decoded = fmt.decode_batch([(SAMPLES / n).read_bytes() for n in names])
    expected = [(k, r) for n in names for k, r in EXPECTED[n]["rows"]]
    got = [(r.pop("_row_kind"), r) for r in decoded.batch.to_pylist()]
    assert got == expected
    assert decoded.messages.tolist() == [i for i, n in enumerate(names) for _ in EXPECTED[n]["rows"]]


def test_tombstone_yields_nothing_for_debezium_and_a_delete_for_upsert() -> None:
    spec = EXPECTED["06_mysql_tombstone"]
    key = (SAMPLES / spec["key_file"]).read_bytes()
    assert spec["kafka_value"] is None
    assert get_format("debezium-json", CUSTOMERS, ["id"]).decode(None, key) == []
    printed = (SAMPLES / "06_mysql_tombstone_value_as_printed.json").read_bytes()
    assert get_format("debezium-json", CUSTOMERS, ["id"]).decode(printed, key) == []
    [(kind, row)] = get_format("upsert", CUSTOMERS, ["id"]).decode(None, key)
    assert (kind.value, row) == ("-D", {"id": 1004, "first_name": None, "last_name": None, "email": None})
    keys = get_key_format("json", CUSTOMERS, ["id"])
    assert keys is not None and keys.decode(key) == {"id": 1004}


def test_update_with_null_before_fails_naming_the_message() -> None:
    name = "10_postgres_update_before_null_no_schema.json"
    fmt = get_format("debezium-json", PRODUCTS, ["id"])
    with pytest.raises(LogFormatError) as info:
        fmt.decode((SAMPLES / name).read_bytes(), None, MessageRef("inventory.products", 2, 41))
    assert EXPECTED[name]["error"] in str(info.value)
    assert (info.value.topic, info.value.partition, info.value.offset) == ("inventory.products", 2, 41)
    assert "topic='inventory.products', partition=2, offset=41" in str(info.value)


def test_update_with_null_before_is_skipped_and_counted_when_ignoring_errors() -> None:
    name = "10_postgres_update_before_null_no_schema.json"
    fmt = get_format("debezium-json", PRODUCTS, ["id"], {"debezium-json.ignore-parse-errors": "true"})
    assert fmt.decode((SAMPLES / name).read_bytes()) == EXPECTED[name]["rows_if_ignore_parse_errors"]
    assert fmt.parse_errors == 1
