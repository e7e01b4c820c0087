"""The Python half of the `managed` Spark SQL catalog (the JVM class `tablestore.spark.jvm.catalog.ManagedCatalog`):
a long-lived helper process per JVM, `python -m tablestore.spark.catalog_service`, speaking JSON lines.

    request   {"id": n, "action": "<name>", "args": {...}}
    response  {"id": n, "ok": true, "result": ...}
              {"id": n, "ok": false, "error": {"type": "TableNotFoundError", "message": "..."}}

Every request's args carry "warehouse" and "options" (the catalog's `table-storage.*` session options, read from
the Spark session's conf at each call). The JVM is an adapter: every rule (identifiers, primary key and
partitioning, option names, types and ranges, which options may change) is the Python catalog's, so SQL users get
the same messages as callers of `Catalog.create_table`. The actions that are not catalog metadata (procedures,
DESCRIBE DETAIL, DELETE, system tables) come from `tablestore.spark.sql_actions`. The same module, started a second
time, is the JVM's commit service (catalog/ServiceCommit.java): it commits the `managed` source's writes
(`commit_stream_write`, `commit_batch_write`) in place of PySpark's commit workers.
"""
from __future__ import annotations

import base64
import json
import logging
import pickle
import sys
import traceback
from typing import IO, Any, Callable, Mapping

import pyarrow as pa

import catalog
import filestore
from tablestore.spark.profiling import profiled
from tablestore.spark.sql_actions import ACTIONS as SQL_ACTIONS
from tablestore.spark.sql_tables import (alter_table, create_table, drop_table, load_table, rename_table,
                                         table_catalog)
from tablestore.spark import handover

log = logging.getLogger(__name__)

Action = Callable[[Mapping[str, Any]], Any]


def _namespace(args: Mapping[str, Any]) -> str:
    parts = list(args.get("namespace") or [])
    if len(parts) != 1:
        raise catalog.InvalidIdentifierError(
            f"namespace {'.'.join(parts)!r} must be one database name (managed tables are 'database.table')")
    return str(parts[0])


def list_namespaces(args: Mapping[str, Any]) -> list[str]:
    if args.get("namespace"):
        _namespace(args)
        return []   # databases have no child namespaces
    return table_catalog(args).list_databases()


def namespace_exists(args: Mapping[str, Any]) -> bool:
    parts = list(args.get("namespace") or [])
    return len(parts) == 1 and table_catalog(args).database_exists(str(parts[0]))


def load_namespace(args: Mapping[str, Any]) -> dict[str, str]:
    return table_catalog(args).database_properties(_namespace(args))


def create_namespace(args: Mapping[str, Any]) -> None:
    table_catalog(args).create_database(_namespace(args), properties=dict(args.get("properties") or {}))


def drop_namespace(args: Mapping[str, Any]) -> bool:
    cat = table_catalog(args)
    name = _namespace(args)
    if not cat.database_exists(name):
        return False
    cat.drop_database(name, cascade=bool(args.get("cascade")))
    return True


def record_log_published(args: Mapping[str, Any]) -> list[int]:
    """The log-only snapshots after the executors produced a commit's log (tablestore/spark/log_publish.py)."""
    from tablestore.spark.log_publish import record

    return record(args)


def plan_read(args: Mapping[str, Any]) -> dict[str, Any] | None:
    """A batch scan (either front door) planned here when Spark's Parquet reader can read all of it
    (tablestore/spark/read.py, `plan_in_service`)."""
    from tablestore.spark.read import plan_in_service

    return plan_in_service(args)


def stream_changes(args: Mapping[str, Any]) -> dict[str, int] | None:
    """A micro-batch of a log-less table's changes for the JVM's stream (tablestore/spark/stream_read.py,
    `changes_in_service`)."""
    from tablestore.spark.stream_read import changes_in_service

    return changes_in_service(args)


def source_schema(args: Mapping[str, Any]) -> str:
    """The `managed` data source's schema for a batch read's or a write's options ("options"), what the Python
    source's `schema()` answers (datasource.schema_of, its option checks included), as Spark's JSON: the JVM
    provider asks here rather than start a Python worker for it (PySpark 4.1: about 0.1 s)."""
    from tablestore.spark.datasource import schema_of

    return schema_of({str(k): str(v) for k, v in dict(args["options"]).items()}).json()


def prepare_stream_commit(args: Mapping[str, Any]) -> None:
    """Imports what `commit_stream_write` needs (catalog/ServiceCommit.java warms the commit service with it while
    a query's first micro-batch runs)."""
    from pyspark.sql.types import StructType  # noqa: F401

    from tablestore.spark import datasource, stream_write  # noqa: F401


def _pickles(args: Mapping[str, Any]) -> list[Any]:
    """The tasks' commit messages of a commit request (`messages`: each the task's pickle in base64, null for a task
    that failed or did not run), as PySpark's commit worker would get them."""
    return [None if m is None else pickle.loads(base64.b64decode(m)) for m in args["messages"]]


def commit_stream_write(args: Mapping[str, Any]) -> None:
    """Commit (or abort, `abort`) micro-batch `epoch` of the streaming write of `options` and `schema` (Spark's
    JSON) with the tasks' commit messages, as PySpark's commit worker would: the same writer
    (tablestore/spark/stream_write.py), built from the same options, keys lowercased as PySpark hands them."""
    from pyspark.sql.types import StructType

    from tablestore.spark.datasource import stream_writer

    options = {str(k).lower(): str(v) for k, v in dict(args["options"]).items()}
    writer = stream_writer(options, StructType.fromJson(json.loads(str(args["schema"]))), False)
    if args.get("abort"):
        writer.abort(_pickles(args), int(args["epoch"]))
    else:
        writer.commit(_pickles(args), int(args["epoch"]))


def commit_batch_write(args: Mapping[str, Any]) -> None:
    """Commit (or abort, `abort`) a batch write with the tasks' commit messages: `writer` is the ManagedWriter
    PySpark's planner pickled (tablestore/spark/write.py), which PySpark would hand its commit worker."""
    from tablestore.spark.write import ManagedWriter, SparkWriteError

    writer = pickle.loads(base64.b64decode(str(args["writer"])))
    if not isinstance(writer, ManagedWriter):
        raise SparkWriteError(f"the commit service got a {type(writer).__name__}, not a managed table's writer")
    if args.get("abort"):
        writer.abort(_pickles(args))
    else:
        writer.commit(_pickles(args))


def list_tables(args: Mapping[str, Any]) -> list[str]:
    return table_catalog(args).list_tables(_namespace(args))


CATALOG_ACTIONS: dict[str, Action] = {
    "list_namespaces": list_namespaces,
    "namespace_exists": namespace_exists,
    "load_namespace": load_namespace,
    "create_namespace": create_namespace,
    "drop_namespace": drop_namespace,
    "list_tables": list_tables,
    "create_table": create_table,
    "load_table": load_table,
    "record_log_published": record_log_published,
    "plan_read": plan_read,
    "source_schema": source_schema,
    "stream_changes": stream_changes,
    "prepare_stream_commit": prepare_stream_commit,
    "commit_stream_write": commit_stream_write,
    "commit_batch_write": commit_batch_write,
    "drop_table": drop_table,
    "rename_table": rename_table,
    "alter_table": alter_table,
    "ping": lambda args: "pong",
}


def actions() -> dict[str, Action]:
    """The catalog's metadata actions and the SQL operations beyond them (procedures, DELETE, system tables)."""
    return {**CATALOG_ACTIONS, **SQL_ACTIONS}


def handle(request: Mapping[str, Any], table: Mapping[str, Action]) -> dict[str, Any]:
    """One request -> its response; every error becomes a typed error response, never a crash."""
    ident = request.get("id")
    try:
        handover.check("service-request", request)
        action = table.get(str(request.get("action")))
        if action is None:
            raise KeyError(f"unknown catalog action {request.get('action')!r}; known: {', '.join(sorted(table))}")
        with profiled(f"catalog-{request.get('action')}"):
            result = action(request.get("args") or {})
        response = {"id": ident, "ok": True, "result": result}
        if handover.checking():   # the response as the JVM reads it (serialized only when checking)
            handover.check("service-response", json.loads(json.dumps(response, default=str)))
        return response
    except Exception as e:   # the JVM turns it into a Spark error with this message, verbatim
        log.debug("action %s failed:\n%s", request.get("action"), traceback.format_exc())
        message = e.args[0] if isinstance(e, KeyError) and e.args else str(e)
        return {"id": ident, "ok": False, "error": {"type": type(e).__name__, "message": message}}


def serve(stdin: IO[str], stdout: IO[str]) -> None:
    table = actions()
    for line in stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
        except ValueError as e:
            response: dict[str, Any] = {"id": None, "ok": False,
                                        "error": {"type": "ProtocolError", "message": f"not JSON: {e}"}}
        else:
            response = handle(request, table)
        stdout.write(json.dumps(response, default=str) + "\n")
        stdout.flush()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # the protocol owns stdout: anything else printed there would break it
    protocol = sys.stdout
    sys.stdout = sys.stderr
    pa.set_cpu_count(1)   # a metadata helper beside a Spark driver: one thread is plenty
    filestore.enable_manifest_cache()   # long-lived: each plan and commit reads only the manifests new to it
    serve(sys.stdin, protocol)


if __name__ == "__main__":
    main()
