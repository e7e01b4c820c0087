"""`tablestore system TABLE NAME`: Paimon's system tables of a table from the command line (tablestore.system_tables,
the same rows as SQL's db.`t$name` and `Table.system_table`)."""
from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from tablestore import cli

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("dt", pa.string(), False), ("v", pa.string())])


@pytest.fixture
def warehouse(tmp_path: Path) -> str:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", schema=SCHEMA, primary_key=["id", "dt"], partition_by=["dt"],
                         options={"bucket": "2", "write-only": "true"})
    t.write(pa.table({"id": [1, 2, 3], "dt": ["a", "a", "b"], "v": ["x", "y", "z"]}, schema=SCHEMA))
    t.write(pa.table({"id": [1], "dt": ["a"], "v": ["X"]}, schema=SCHEMA))
    t.delete(pa.compute.field("id") == 3)
    return str(tmp_path)


def test_system_partitions_audit_log_and_latest_changes_as_json(warehouse: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--warehouse", warehouse, "--output", "json", "system", "db.t", "partitions"]) == 0
    parts = json.loads(capsys.readouterr().out)
    files = tablestore.Catalog(warehouse).get_table("db.t").files()
    assert [p["partition"] for p in parts] == ["dt=a", "dt=b"]
    assert sum(p["file_count"] for p in parts) == len(files)
    assert cli.main(["--warehouse", warehouse, "--output", "json", "system", "db.t", "audit_log"]) == 0
    audit = json.loads(capsys.readouterr().out)
    assert list(audit[0]) == ["rowkind", "id", "dt", "v"]                        # every live row, Paimon's way
    assert sorted((r["rowkind"], r["id"], r["v"]) for r in audit) == [("+I", 1, "X"), ("+I", 2, "y")]
    assert cli.main(["--warehouse", warehouse, "--output", "json", "system", "db.t", "latest_changes"]) == 0
    assert [(r["_row_kind"], r["id"], r["v"]) for r in json.loads(capsys.readouterr().out)] == [("-D", 3, "z")]


def test_system_options_as_text_and_an_unknown_name(warehouse: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--warehouse", warehouse, "system", "db.t", "options"]) == 0
    assert "key=bucket  value=2" in capsys.readouterr().out.splitlines()
    assert cli.main(["--warehouse", warehouse, "system", "db.t", "snapshotz"]) == 1   # a usage error
    err = capsys.readouterr().err
    assert "invalid choice: 'snapshotz'" in err and "'audit_log'" in err and "'latest_changes'" in err
