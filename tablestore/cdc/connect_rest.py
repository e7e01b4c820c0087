"""The Kafka Connect REST API as the development helpers use it: a Debezium PostgreSQL connector registered with
sensible defaults, its status watched until it runs, deleted. tablestore/cdc/connect.py runs the worker itself.

Invariant: ``register_postgres`` is idempotent (``PUT /connectors/NAME/config``) and returns only once the
connector and its task run; a failed task is a `ConnectorFailedError` with the first line of its trace.
"""
from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from typing import Any, Sequence
from urllib.parse import quote

from tablestore.cdc.dev_process import DevServiceError

__all__ = ["ConnectError", "ConnectorFailedError", "POSTGRES_CONNECTOR", "answers", "connector_status",
           "delete_connector", "register_postgres", "slot_name_for"]

POSTGRES_CONNECTOR = "io.debezium.connector.postgresql.PostgresConnector"


class ConnectError(DevServiceError):
    """The worker's REST API refused or failed a request, or its Kafka cluster cannot be reached."""


class ConnectorFailedError(ConnectError):
    """A connector or its task is FAILED; names the connector, the task, the first line of its trace and the last
    `Caused by:` line (the root cause); `trace` keeps it all."""

    def __init__(self, name: str, what: str, trace: str) -> None:
        lines = [ln.strip() for ln in trace.splitlines() if ln.strip()]
        causes = [ln.removeprefix("Caused by: ") for ln in lines if ln.startswith("Caused by: ")]
        root = f" (root cause: {causes[-1]})" if causes and causes[-1] != lines[0] else ""
        super().__init__(f"connector {name!r}: {what} FAILED: {lines[0] if lines else 'no trace'}{root}")
        self.name = name
        self.trace = trace


def slot_name_for(name: str) -> str:
    """A valid replication slot name for connector `name`: lower case letters, digits and '_', at most 63."""
    slot = re.sub(r"[^a-z0-9_]", "_", name.lower())
    return ("_" + slot if not slot[:1].isalpha() and not slot.startswith("_") else slot)[:63]


def register_postgres(worker_url: str, name: str, *, host: str, port: int, user: str, password: str | None,
                      dbname: str, topic_prefix: str, slot_name: str | None = None,
                      schemas: Sequence[str] = ("public",), tables: Sequence[str] | None = None, partitions: int = 1,
                      config: dict[str, str] | None = None, wait_s: float = 60) -> dict[str, Any]:
    """Create or update the Debezium PostgreSQL connector `name` (plugin pgoutput, a publication of its captured
    tables made by the connector, topics ``<topic_prefix>.<schema>.<table>`` created with `partitions` partitions)
    and wait until it and its task run; `config` overrides any setting. A table without a schema is looked up in
    each of `schemas`. Returns the connector's status as the REST API gives it."""
    slot = slot_name or slot_name_for(name)
    settings = {
        "connector.class": POSTGRES_CONNECTOR,
        "tasks.max": "1",
        "plugin.name": "pgoutput",
        "database.hostname": host,
        "database.port": str(port),
        "database.user": user,
        "database.dbname": dbname,
        "topic.prefix": topic_prefix,
        "slot.name": slot,
        "publication.name": slot,   # one publication per connector (the default name is shared by all of them)
        "publication.autocreate.mode": "filtered",
        "schema.include.list": ",".join(schemas),
        "topic.creation.default.replication.factor": "1",   # a broker that does not auto-create topics (the development broker does)
        "topic.creation.default.partitions": str(partitions),
        "tombstones.on.delete": "true",
    }
    if password:
        settings["database.password"] = password
    if tables:
        qualified: list[str] = []
        for table in tables:
            qualified += [table] if "." in table else [f"{schema}.{table}" for schema in schemas]
        settings["table.include.list"] = ",".join(qualified)
    settings.update(config or {})
    deadline = time.monotonic() + wait_s
    while True:   # 409: the worker is rebalancing; the request is retried until the deadline
        code, body = _request("PUT", f"{worker_url}/connectors/{quote(name, safe='')}/config", settings)
        if code in (200, 201):
            break
        if code != 409 or time.monotonic() >= deadline:
            detail = _config_errors(worker_url, name, settings) if code else ""
            raise _failed(worker_url, name, "registering its config", code, detail or _message(body))
        time.sleep(0.5)
    return _wait_running(worker_url, name, deadline, wait_s)


def connector_status(worker_url: str, name: str) -> dict[str, Any] | None:
    """The connector's status (``GET /connectors/NAME/status``: its state and its tasks'), None if unknown."""
    code, body = _request("GET", f"{worker_url}/connectors/{quote(name, safe='')}/status")
    if code == 404:
        return None
    if code != 200 or not isinstance(body, dict):
        raise _failed(worker_url, name, "asking its status", code, _message(body))
    return body


def delete_connector(worker_url: str, name: str, *, wait_s: float = 30) -> bool:
    """Delete the connector and wait until the worker no longer knows it (a DELETE returns before its task has
    stopped). Its replication slot stays in the database. False if there was none."""
    code, body = _request("DELETE", f"{worker_url}/connectors/{quote(name, safe='')}")
    if code == 404:
        return False
    if code not in (200, 204):
        raise _failed(worker_url, name, "deleting it", code, _message(body))
    deadline = time.monotonic() + wait_s
    while (last := connector_status(worker_url, name)) is not None:
        if time.monotonic() >= deadline:
            raise ConnectError(f"connector {name!r} at {worker_url} still there {wait_s:.0f} s after its deletion: "
                               f"last status {last}")
        time.sleep(0.2)
    return True


def answers(url: str, timeout_s: float) -> bool:
    """Whether the worker at `url` serves connectors: ``GET /`` and ``GET /connectors`` both answer (a distributed
    worker answers ``/`` before it has joined its group)."""
    root, _ = _request("GET", f"{url}/", timeout_s=timeout_s)
    return root == 200 and _request("GET", f"{url}/connectors", timeout_s=timeout_s)[0] == 200


# ---------------------------------------------------------------------------------------------- internals


def _request(method: str, url: str, body: object = None, timeout_s: float = 30) -> tuple[int, Any]:
    """(HTTP status, decoded JSON body or text); 0 when nothing answers."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            code, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        code, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        return 0, str(getattr(exc, "reason", exc))
    try:
        return code, json.loads(raw) if raw else None
    except ValueError:
        return code, raw.decode(errors="replace")


def _message(body: Any) -> str:
    text = body.get("message", body) if isinstance(body, dict) else body
    return str(text).strip().splitlines()[0][:500] if str(text).strip() else "no message"


def _failed(worker_url: str, name: str, doing: str, code: int, detail: str) -> ConnectError:
    if code == 0:
        return ConnectError(f"connector {name!r}: no Kafka Connect worker answers at {worker_url} ({detail}): start "
                            "one with `tablestore connect start` or give its URL")
    return ConnectError(f"connector {name!r}: {doing} at {worker_url} failed (HTTP {code}): {detail}")


def _config_errors(worker_url: str, name: str, settings: dict[str, str]) -> str:
    """What the connector's own validation says of `settings` ("key: error; ..."). Connect 4.1 answers an invalid
    Debezium config with an HTTP 500 about a null pointer instead (a setting of Debezium's has no value to report)."""
    plugin = quote(settings.get("connector.class", ""), safe="")
    code, body = _request("PUT", f"{worker_url}/connector-plugins/{plugin}/config/validate", {**settings, "name": name})
    if code != 200 or not isinstance(body, dict):
        return ""
    found = [f"{c['value'].get('name')}: {error}" for c in body.get("configs", []) if c.get("value")
             for error in c["value"].get("errors") or ()]
    return "; ".join(found)


def _wait_running(url: str, name: str, deadline: float, wait_s: float) -> dict[str, Any]:
    last: dict[str, Any] | None = None
    while True:
        last = connector_status(url, name)
        if last is not None:
            connector, tasks = last.get("connector", {}), last.get("tasks", [])
            if connector.get("state") == "FAILED":
                raise ConnectorFailedError(name, "the connector", connector.get("trace", ""))
            for task in tasks:
                if task.get("state") == "FAILED":
                    raise ConnectorFailedError(name, f"task {task.get('id')}", task.get("trace", ""))
            if connector.get("state") == "RUNNING" and tasks and all(t.get("state") == "RUNNING" for t in tasks):
                return last
        if time.monotonic() >= deadline:
            raise ConnectError(f"connector {name!r} at {url} not RUNNING after {wait_s:.0f} s: last status {last}")
        time.sleep(0.25)
