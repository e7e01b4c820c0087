"""The hand-over formats between the Spark jar and Python (tablestore/spark/handover.py): one valid JSON Schema per
format, each in the folder; a document that breaks one is refused naming the format and the place when checking is
on (the test suite turns it on for every Spark test: tests/conftest.py)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from tablestore.spark import handover
from tablestore.spark.catalog_service import actions, handle


def test_one_valid_schema_per_format_and_no_other_file() -> None:
    assert sorted(p.name for p in handover.SCHEMAS.iterdir()) == sorted(f"{n}.schema.json" for n in handover.NAMES)
    for name in handover.NAMES:
        jsonschema.Draft202012Validator.check_schema(handover.schema(name))
        assert handover.schema(name)["description"]   # who writes it, who reads it


def test_the_suite_checks_every_handover() -> None:
    assert handover.checking()


GOOD = {
    "raw-plan": {"python_partitions": 1, "raw": [["/wh/db/t/bucket-0/data-0.parquet"]],
                 "merge": [[["/wh/db/t/bucket-1/data-2.parquet"], ["/wh/db/t/bucket-1/data-1.parquet"]]],
                 "keys": ["id"]},
    "jvm-task-commit": {"task": 0, "bucket": 0, "rows": 10, "files": ["data-1.parquet"]},
    "predicates": [{"op": "=", "args": [{"ref": ["dt"]}, {"lit": "2024-01-01", "type": "string"}]}],
    "jvm-write-plan": {"usable": False, "reason": "table 'db.t': a partitioned table"},
}
BAD = {
    "raw-plan": ({"python_partitions": -1, "raw": []}, "python_partitions"),
    "jvm-task-commit": ({"task": 0, "bucket": 0, "rows": 10, "files": "data-1.parquet"}, "files"),
    "predicates": ([{"op": "=", "args": [{"column": "dt"}]}], "0/args/0"),
    "jvm-write-plan": ({"usable": True, "reason": "x"}, "usable"),
}


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_document_of_its_format_passes_and_a_broken_one_is_named(name: str) -> None:
    handover.check(name, GOOD[name])
    document, where = BAD[name]
    expected = re.escape(f"{name} does not match handover/{name}.schema.json at {where}:")
    with pytest.raises(handover.HandoverError, match=expected):
        handover.check(name, document)


def test_a_task_that_wrote_several_buckets_names_its_files_per_bucket() -> None:
    """The commit of a JVM task not given one bucket's rows (sink.shuffle-by-bucket = false): a run per bucket."""
    from tablestore.spark.jvm_write import JvmTaskCommit

    runs = [{"task": 1, "bucket": b, "rows": 5, "files": [f"data-{b}.parquet"]} for b in (0, 2)]
    commit = JvmTaskCommit(json.dumps({"task": 1, "runs": runs}))
    assert commit.runs == [(0, ["data-0.parquet"]), (2, ["data-2.parquet"])]
    assert JvmTaskCommit(json.dumps(runs[0])).runs == [(0, ["data-0.parquet"])]
    with pytest.raises(handover.HandoverError, match="jvm-task-commit"):
        JvmTaskCommit(json.dumps({"task": 1, "runs": [{"bucket": 0}]})).runs


def test_checking_off_costs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(handover.CHECK_ENV, "0")
    handover.check("raw-plan", {"anything": "goes"})


def test_a_malformed_service_request_gets_an_error_response() -> None:
    response = handle({"id": 3, "action": "list_namespaces"}, actions())   # no args
    assert response["ok"] is False and response["error"]["type"] == "HandoverError"
    assert "service-request" in response["error"]["message"]
    json.dumps(response)


def test_plan_files_are_readable_by_their_user_only(tmp_path: Path) -> None:
    """Plan files carry the catalog's options, S3 credentials among them: mode 0600 whatever the umask, also when
    a file was there with a wider mode."""
    import os
    import stat

    path = tmp_path / "plan.json"
    path.write_text("{}")
    path.chmod(0o644)
    previous = os.umask(0)
    try:
        handover.write_private(str(path), {"catalog_options": [["s3.secret-key", "x"]]})
    finally:
        os.umask(previous)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert json.loads(path.read_text()) == {"catalog_options": [["s3.secret-key", "x"]]}
    assert [p.name for p in tmp_path.iterdir()] == ["plan.json"]   # no temp file left
