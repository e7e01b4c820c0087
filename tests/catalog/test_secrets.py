"""Secrets among options (catalog.secrets): which keys hold one, and that nothing showing options shows their values:
`Table.describe()`, `tablestore describe`, `$schemas`, option errors."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import catalog
import tablestore
from catalog.secrets import REDACTED, SPARK_REDACTION_REGEX, is_secret, redact_options, scrub

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr3t-Pa55word"
JAAS = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="{PASSWORD}";'


@pytest.mark.parametrize("key", [
    "log.properties.sasl.password", "log.properties.ssl.keystore.password", "log.properties.sasl.jaas.config",
    "s3.access-key", "s3.secret-key", "s3.session-token", "fs.s3a.secret.key", "api_key", "MY.TOKEN",
    "log.properties.ssl.key.password", "x.credentials.provider"])
def test_keys_that_hold_secrets(key: str) -> None:
    assert is_secret(key)
    assert re.search(SPARK_REDACTION_REGEX, key), "Spark's regex is looser than the rule, never stricter"


@pytest.mark.parametrize("key", ["log.key.format", "bucket-key", "primary-key", "log.properties.bootstrap.servers",
                                 "sequence.field", "monkey", "keyring.path", "bucket"])
def test_keys_that_do_not(key: str) -> None:
    assert not is_secret(key)


def test_every_declared_option_is_shown_and_the_s3_credentials_are_not() -> None:
    assert not [o.key for o in catalog.ALL_OPTIONS if is_secret(o.key)]
    assert redact_options({"s3.access-key": "AKIA1", "s3.endpoint": "http://x"}) == {
        "s3.access-key": REDACTED, "s3.endpoint": "http://x"}
    assert scrub(f"login failed for {PASSWORD} at x", {"log.properties.sasl.password": PASSWORD,
                                                      "bucket": "4"}) == f"login failed for {REDACTED} at x"


def _table(tmp_path: Path) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    return cat.create_table("db.t", schema, primary_key=["id"], options={
        "log.system": "none", "log.properties.sasl.password": PASSWORD, "log.properties.sasl.jaas.config": JAAS,
        "log.properties.sasl.mechanism": "SCRAM-SHA-512"})


def test_describe_schemas_and_the_cli_never_show_a_secret(tmp_path: Path) -> None:
    t = _table(tmp_path)
    assert t.options["log.properties.sasl.password"] == PASSWORD   # the table keeps it: its log needs it
    described = t.describe()
    options = described["options"]
    assert isinstance(options, dict)
    assert options["log.properties.sasl.password"] == REDACTED == options["log.properties.sasl.jaas.config"]
    assert options["log.properties.sasl.mechanism"] == "SCRAM-SHA-512"
    assert PASSWORD not in json.dumps(described, default=str)
    schemas = t.system_table("schemas").to_pylist()
    assert schemas and PASSWORD not in json.dumps(schemas, default=str)
    for args in (["describe", "db.t", "--warehouse", str(tmp_path)],
                 ["describe", "db.t", "--warehouse", str(tmp_path), "--output", "json"]):
        done = subprocess.run([sys.executable, "-m", "tablestore.cli", *args], capture_output=True, text=True,
                              cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "log.properties.sasl.password" in done.stdout and PASSWORD not in done.stdout + done.stderr
