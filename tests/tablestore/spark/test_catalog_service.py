"""The Python half of the SQL catalog without Spark: the JSON-lines protocol of `python -m
tablestore.spark.catalog_service` and the metadata actions (a real subprocess, as the JVM starts it)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tablestore.spark.catalog_service import CATALOG_ACTIONS, handle

pytestmark = pytest.mark.version_independent   # the catalog service's Python side: no PySpark API

SPARK_SCHEMA = json.dumps({"type": "struct", "fields": [
    {"name": "id", "type": "long", "nullable": False, "metadata": {}},
    {"name": "dt", "type": "string", "nullable": False, "metadata": {}},
    {"name": "note", "type": "string", "nullable": True, "metadata": {"comment": "free text"}},
]})


def test_protocol_over_a_subprocess(tmp_path: Path) -> None:
    base = {"warehouse": str(tmp_path), "options": {"table-storage.bucket": "3"}}
    requests: list[dict[str, Any]] = [
        {"id": 1, "action": "create_namespace", "args": {**base, "namespace": ["db"], "properties": {"k": "v"}}},
        {"id": 2, "action": "create_table", "args": {
            **base, "table": ["db", "t"], "schema": SPARK_SCHEMA, "partition_keys": ["dt"],
            "constraints": [{"kind": "primary_key", "name": "pk", "columns": ["id", "dt"]}],
            "properties": {"provider": "managed", "owner": "me", "comment": "c", "option.write-only": "true",
                           "write-only": "true"}}},
        {"id": 3, "action": "load_namespace", "args": {**base, "namespace": ["db"]}},
        {"id": 4, "action": "load_table", "args": {**base, "table": ["db", "missing"]}},
        {"id": 5, "action": "nope", "args": {}},
    ]
    lines = "".join(json.dumps(r) + "\n" for r in requests) + "not json\n"
    done = subprocess.run([sys.executable, "-m", "tablestore.spark.catalog_service"], input=lines,
                          capture_output=True, text=True, timeout=120)
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert [a["id"] for a in answers] == [1, 2, 3, 4, 5, None]
    created = answers[1]["result"]
    assert created["primary_key"] == ["id", "dt"] and created["partition_keys"] == ["dt"]
    assert created["comment"] == "c" and created["bucket"] == 3 and created["options"]["write-only"] == "true"
    assert json.loads(created["schema"])["fields"][2]["metadata"] == {"comment": "free text"}
    assert answers[2]["result"] == {"k": "v"}
    assert answers[3]["error"]["type"] == "TableNotFoundError" and "'db.missing'" in answers[3]["error"]["message"]
    assert answers[4]["error"]["message"].startswith("unknown catalog action 'nope'")
    assert answers[5]["error"]["type"] == "ProtocolError"


def test_create_table_rules_are_the_catalogs(tmp_path: Path) -> None:
    base = {"warehouse": str(tmp_path), "options": {}}
    assert handle({"id": 1, "action": "create_namespace", "args": {**base, "namespace": ["db"]}},
                  CATALOG_ACTIONS)["ok"]

    def create(**extra: Any) -> dict[str, Any]:
        args = {**base, "table": ["db", "t"], "schema": SPARK_SCHEMA, **extra}
        return handle({"id": 2, "action": "create_table", "args": args}, CATALOG_ACTIONS)

    refused = {
        "PRIMARY KEY (id) and TBLPROPERTIES 'primary-key' = 'dt' disagree": create(
            constraints=[{"kind": "primary_key", "columns": ["id"]}], properties={"primary-key": "dt"}),
        "is not supported; a managed table has a PRIMARY KEY": create(
            constraints=[{"kind": "other", "ddl": "CONSTRAINT c CHECK (id > 0)"}]),
        "LOCATION is not supported": create(properties={"location": "/elsewhere"}),
        "USING delta is not supported": create(properties={"provider": "delta"}),
        "partition columns ['dt'] must be part of the primary key ['id']": create(
            partition_keys=["dt"], properties={"primary-key": "id"}),
    }
    for message, answer in refused.items():
        assert not answer["ok"] and message in answer["error"]["message"], answer
    assert create(properties={"primary-key": "id"})["result"]["primary_key"] == ["id"]
