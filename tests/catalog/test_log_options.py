"""Log options at CREATE TABLE: the combinations FLIP-188 rules out are rejected with an error naming the option
before any broker is contacted, defaults are resolved and stored, and the typed log-store options follow them.

The session points at a closed port: a test that reached the network would fail slowly with a LogStoreError, so
every rejection here is also proof that it came first."""
from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from catalog.logconfig import log_store_options
from catalog.table_options import TableOptions
from tablestore import InvalidOptionError, InvalidTableError

CLOSED_PORT = "127.0.0.1:1"
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


@pytest.fixture
def cat(tmp_path: Path) -> tablestore.Catalog:
    c = tablestore.Catalog(str(tmp_path / "wh"),
                           options={"table-storage.log.properties.bootstrap.servers": CLOSED_PORT})
    c.create_database("db")
    return c


def rejected(cat: tablestore.Catalog, error: type[Exception], match: str, *, pk: bool, **options: str) -> None:
    started = time.monotonic()
    with pytest.raises(error, match=match):
        cat.create_table("db.t", SCHEMA, primary_key=["id"] if pk else None, options=options)
    assert time.monotonic() - started < 2, "rejected only after a network call"
    assert not cat.table_exists("db.t")


@pytest.mark.parametrize("option,value", [
    ("log.consistency", "eventual"),
    ("log.changelog-mode", "upsert"),
    ("log.format", "upsert"),
])
def test_options_that_need_a_primary_key(cat: tablestore.Catalog, option: str, value: str) -> None:
    rejected(cat, InvalidTableError, rf"{option} = '{value}' needs a primary key", pk=False, **{option: value})


def test_changelog_mode_all_with_eventual_consistency(cat: tablestore.Catalog) -> None:
    rejected(cat, InvalidTableError, r"log.changelog-mode = 'all' requires log.consistency = 'transactional'",
             pk=True, **{"log.changelog-mode": "all", "log.consistency": "eventual"})


def test_upsert_format_cannot_store_update_before(cat: tablestore.Catalog) -> None:
    rejected(cat, InvalidTableError, r"log.format = 'upsert' cannot store UPDATE_BEFORE", pk=True,
             **{"log.format": "upsert", "log.changelog-mode": "all"})


def test_unknown_format_option(cat: tablestore.Catalog) -> None:
    rejected(cat, InvalidOptionError, r"debezium-json.*no-such-option", pk=True,
             **{"debezium-json.no-such-option": "true"})


def test_bad_format_option_value(cat: tablestore.Catalog) -> None:
    rejected(cat, InvalidOptionError, r"schema-include", pk=True, **{"debezium-json.schema-include": "maybe"})


@pytest.mark.parametrize("option,value", [
    ("log.format", "csv"), ("log.changelog-mode", "retract"), ("log.consistency", "exactly-once"),
    ("log.scan", "earliest"), ("log.system", "pulsar"), ("log.retention", "forever"),
])
def test_unknown_option_values(cat: tablestore.Catalog, option: str, value: str) -> None:
    rejected(cat, InvalidOptionError, rf"{value}", pk=True, **{option: value})


def test_kafka_without_bootstrap_servers(tmp_path: Path) -> None:
    plain = tablestore.Catalog(str(tmp_path / "plain"))
    plain.create_database("db")
    rejected(plain, InvalidOptionError, r"no bootstrap servers.*log.properties.bootstrap.servers", pk=True,
             **{"log.system": "kafka"})


def test_options_of_the_other_formats_do_not_matter(cat: tablestore.Catalog) -> None:
    """Options of a format the table does not use are not checked against it (as in Flink), and with
    log.system = none nothing of the log is contacted or resolved."""
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={
        "log.system": "none", "debezium-json.schema-include": "true", "log.consistency": "eventual"})
    assert "log.topic" not in t.options


@pytest.mark.parametrize("pk,mode,expected", [
    (True, "auto", "upsert"), (False, "auto", "all"), (True, "all", "all"), (True, "upsert", "upsert"),
])
def test_auto_changelog_mode_follows_the_primary_key(pk: bool, mode: str, expected: str) -> None:
    options = TableOptions({"log.system": "kafka", "log.topic": "db.t.x", "log.changelog-mode": mode,
                            "log.properties.bootstrap.servers": CLOSED_PORT, "bucket": "3",
                            "log.retention": "30 min", "debezium-json.schema-include": "true"})
    log = log_store_options(options, has_primary_key=pk)
    assert log is not None
    assert (log.changelog_mode, log.partitions, log.retention_ms, log.topic) == (expected, 3, 30 * 60_000, "db.t.x")
    assert log.consistency == "transactional" and log.format == "debezium-json" and log.scan == "full"
    assert log.bootstrap_servers == CLOSED_PORT
    assert log.format_options == {"debezium-json.schema-include": "true"}


def test_no_log_store_options_for_log_system_none() -> None:
    assert log_store_options(TableOptions({"log.system": "none"}), has_primary_key=True) is None
    assert log_store_options(TableOptions({}), has_primary_key=True) is None
