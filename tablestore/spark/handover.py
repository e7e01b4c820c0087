"""The JSON documents the Spark jar and the Python side hand each other, one JSON Schema each, in one place:
`tablestore/spark/handover/<name>.schema.json` (each names its writer and its reader).

| name | from | to |
|---|---|---|
| raw-plan | read.py (batch read planning) | read/RawSplits.java |
| jvm-write-plan | jvm_write.py (the driver) | write/WritePlan.java |
| jvm-task-commit | write/TaskCommits.java (a task) | jvm_write.py (the driver's commit) |
| predicates | catalog/PredicateJson.java | predicates.py |
| service-request | catalog/PythonService.java | catalog_service.py |
| service-response | catalog_service.py | catalog/PythonService.java |
| table-meta | sql_tables.py (load, create, alter table) | catalog/ManagedTable.java, BucketClustering.java |

`check(name, document)` validates a document against its schema where Python writes or reads it, when the
environment sets `TABLESTORE_CHECK_HANDOVER=1` (the test suite does, tests/conftest.py), so every document that
crosses in any test, from either side, is held to its one schema; otherwise it costs nothing (production reads
the documents as they are)."""
from __future__ import annotations

import contextlib
import functools
import json
import os
from pathlib import Path
from typing import Any

from tablestore.errors import TableStoreError

SCHEMAS = Path(__file__).resolve().parent / "handover"
CHECK_ENV = "TABLESTORE_CHECK_HANDOVER"
NAMES = ("raw-plan", "jvm-write-plan", "jvm-task-commit", "predicates", "service-request", "service-response",
         "table-meta")


class HandoverError(TableStoreError):
    """A document handed between the JVM and Python does not match its schema (a bug of one side)."""


@functools.cache
def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of the hand-over document `name`."""
    if name not in NAMES:
        raise KeyError(f"no hand-over format {name!r}; known: {', '.join(NAMES)}")
    loaded: dict[str, Any] = json.loads((SCHEMAS / f"{name}.schema.json").read_text(encoding="utf-8"))
    return loaded


@functools.cache
def _validator(name: str) -> Any:
    import jsonschema   # the tests' dependency (the `test` extra), needed only when checking

    return jsonschema.Draft202012Validator(schema(name))


def checking() -> bool:
    return os.environ.get(CHECK_ENV, "") not in ("", "0", "false")


def check(name: str, document: Any) -> None:
    """Raises HandoverError when checking is on (`TABLESTORE_CHECK_HANDOVER`) and `document` is not a `name`."""
    if not checking():
        return
    from jsonschema.exceptions import best_match

    error = best_match(_validator(name).iter_errors(document))   # the deepest within a oneOf
    if error is not None:
        where = "/".join(map(str, error.absolute_path)) or "(root)"
        raise HandoverError(f"hand-over document {name} does not match handover/{name}.schema.json at {where}: "
                            f"{error.message}")


def write_private(path: str, document: Any) -> None:
    """Write `document` as JSON to the local file `path`, readable and writable by this user only (mode 0600,
    whatever the umask): plan files carry the catalog's options, S3 credentials among them (docs/operations.md,
    Secrets). Replaces a file that is there, its mode included."""
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise
    os.replace(tmp, path)
