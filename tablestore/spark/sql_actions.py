"""The SQL operations of the `managed` Spark catalog beyond metadata, as actions of the catalog's Python helper
(`tablestore.spark.catalog_service`, which merges `ACTIONS` into its dispatch table): procedures
(`CALL managed.system.compact / expire_snapshots / describe_detail`), `DELETE FROM` and the system tables
`t$snapshots` / `t$files` / `t$schemas` / `t$options` / `t$partitions` / `t$buckets` / `t$manifests` /
`t$audit_log` / `t$latest_changes` (tablestore.system_tables). Each is a thin call to the Python owner
(`tablestore.maintenance`, `Table`), so SQL and the CLI report the same numbers and raise the same errors.

Every action takes the request's args ("warehouse", "options": the catalog's `table-storage.*` session options,
"table": "db.t", and its own) and returns a result for a Spark `LocalScan`:
    {"schema": "<Spark DDL of the columns>", "rows": [[value, ...], ...]}
with JSON values by column type: TIMESTAMP as epoch milliseconds, ARRAY as a list, MAP as an object (keys as
strings, converted to the key type by the JVM).
"""
from __future__ import annotations

import datetime as dt
import json
from typing import Any, Callable, Iterable, Mapping, Sequence

import pyarrow as pa

import catalog
from tablestore import maintenance, system_tables
from tablestore.catalog import Catalog
from tablestore.errors import TableStoreError
from tablestore.spark import predicates
from tablestore.spark.partition_expiry_sql import expire_partitions as _expire_partitions
from tablestore.spark import tags_sql
from tablestore.spark import consumers_sql
from tablestore.table import Table

Action = Callable[[Mapping[str, Any]], Any]
Columns = Sequence[tuple[str, str]]


def _result(columns: Columns, rows: Iterable[Sequence[Any]]) -> dict[str, Any]:
    return {"schema": ", ".join(f"`{name}` {type_}" for name, type_ in columns), "rows": [list(r) for r in rows]}


def _name(args: Mapping[str, Any]) -> str:
    """args["table"]: 'database.table' (as users write it in a CALL) or its parts (as the JVM sends an
    identifier)."""
    name = args.get("table")
    if isinstance(name, (list, tuple)):
        name = ".".join(str(p) for p in name)
    if not isinstance(name, str) or not name:
        raise catalog.InvalidIdentifierError(f"give the table as 'database.table', got {name!r}")
    return name


def _table(args: Mapping[str, Any]) -> Table:
    return Catalog(str(args["warehouse"]), dict(args.get("options") or {})).get_table(_name(args))


def _specs(text: object) -> list[dict[str, str | None]]:
    if text is None:
        return []
    if not isinstance(text, str):
        raise TableStoreError(f"partitions must be text 'column=value[,column=value...][;...]', got {text!r}")
    return maintenance.parse_partition_specs([text])


def _millis(iso: str | None) -> int | None:
    return None if iso is None else int(dt.datetime.fromisoformat(iso).timestamp() * 1000)


def _partition_name(values: Mapping[str, Any]) -> str:
    """Hive style, as Spark's SHOW PARTITIONS prints them: `dt=2024-01-01/region=eu` (a null value as `null`)."""
    return "/".join(f"{k}={'null' if v is None else v}" for k, v in values.items())


# -- CALL managed.system.compact(table => 'db.t', partitions => 'dt=2024-01-01[;...]', full => true) ---------------
COMPACT_COLUMNS: Columns = (
    ("table", "STRING"), ("snapshot_id", "BIGINT"), ("full", "BOOLEAN"), ("partitions", "STRING"),
    ("files_before", "BIGINT"), ("files_after", "BIGINT"), ("bytes_before", "BIGINT"), ("bytes_after", "BIGINT"),
    ("max_runs_per_bucket_before", "INT"), ("max_runs_per_bucket_after", "INT"), ("seconds", "DOUBLE"),
)


def compact(args: Mapping[str, Any]) -> dict[str, Any]:
    """Synchronous compaction, as `tablestore compact` (full by default: every bucket of the selected partitions
    becomes one sorted run; `full => false` runs the universal compaction picker instead)."""
    table = _table(args)
    full = True if args.get("full") is None else bool(args.get("full"))
    specs = _specs(args.get("partitions"))
    if args.get("where") is not None and not specs:   # OPTIMIZE ... WHERE that selects no partition
        nothing = {"files": 0, "bytes": 0, "max_runs_per_bucket": 0}
        return _compact_result({"table": table.name, "snapshot_id": None, "full": full, "before": nothing,
                                "after": nothing, "seconds": 0.0}, args)
    return _compact_result(maintenance.compact(table, full=full, partitions=specs), args)


def compact_commit(args: Mapping[str, Any]) -> dict[str, Any]:
    """`compact`'s result when the executors rewrote the buckets (tablestore/spark/compact_job.py): their commit
    messages `args["tasks"]` committed in one COMPACT snapshot."""
    from tablestore.spark.compact_job import commit

    return _compact_result(commit(_table(args), args), args)


def _compact_result(report: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    b, a = report["before"], report["after"]
    return _result(COMPACT_COLUMNS, [[
        report["table"], report["snapshot_id"], report["full"], args.get("partitions"), b["files"], a["files"],
        b["bytes"], a["bytes"], b["max_runs_per_bucket"], a["max_runs_per_bucket"], report["seconds"],
    ]])


# -- CALL managed.system.expire_snapshots(table => 'db.t', retain_last => 5) -------------------------------------
EXPIRE_COLUMNS: Columns = (("expired_snapshots", "BIGINT"), ("deleted_files", "BIGINT"),
                           ("expired_ids", "ARRAY<BIGINT>"))


def expire_snapshots(args: Mapping[str, Any]) -> dict[str, Any]:
    """Without `retain_last`: per the table's retention options, as `tablestore expire`."""
    retain_last = args.get("retain_last")
    result = _table(args).expire_snapshots(retain_last=None if retain_last is None else int(retain_last))
    return _result(EXPIRE_COLUMNS, [[len(result.expired_snapshots), result.deleted_files,
                                     list(result.expired_snapshots)]])


# -- DESCRIBE DETAIL managed.db.t [PARTITION (...)] ----------------------------------------------------------------
DETAIL_COLUMNS: Columns = (
    ("name", "STRING"), ("path", "STRING"), ("file_format", "STRING"), ("bucket", "INT"),
    ("primary_key", "ARRAY<STRING>"), ("partition_by", "ARRAY<STRING>"), ("log_system", "STRING"),
    ("log_topic", "STRING"), ("log_bootstrap_servers", "STRING"), ("log", "MAP<STRING, STRING>"),
    ("options", "MAP<STRING, STRING>"), ("latest_snapshot_id", "BIGINT"), ("snapshot_count", "BIGINT"),
    ("record_count", "BIGINT"), ("num_files", "BIGINT"), ("total_file_size", "BIGINT"),
    ("files_per_level", "MAP<INT, BIGINT>"), ("num_partitions", "BIGINT"), ("compacted", "BOOLEAN"),
    ("last_modified", "TIMESTAMP"),
)
PARTITION_DETAIL_COLUMNS: Columns = (
    ("name", "STRING"), ("partition", "STRING"), ("num_files", "BIGINT"), ("total_file_size", "BIGINT"),
    ("record_count", "BIGINT"), ("sorted_runs", "MAP<INT, INT>"), ("compacted", "BOOLEAN"),
    ("last_modified", "TIMESTAMP"),
)


def describe_detail(args: Mapping[str, Any]) -> dict[str, Any]:
    """FLIP-188's DESCRIBE DETAIL (the fields of `tablestore describe`): one row for the table, or with
    `partition` ('column=value[,...]', as PARTITION (...) gives it) one row per partition it selects."""
    table = _table(args)
    specs = _specs(args.get("partition"))
    if specs:
        return _result(PARTITION_DETAIL_COLUMNS, [[
            table.name, _partition_name(p["partition"]), p["file_count"], p["total_file_size"], p["record_count"],
            p["sorted_runs"], p["compacted"], _millis(p["last_modified"]),
        ] for p in maintenance.partition_details(table, specs)])
    d: dict[str, Any] = table.describe()
    log, snap, parts = d["log"], d["latest_snapshot"], d["partitions"]
    return _result(DETAIL_COLUMNS, [[
        d["name"], d["path"], d["file_format"], d["bucket"], d["primary_key"], d["partition_by"], log["system"],
        log.get("topic"), log.get("bootstrap"), log, {k: str(v) for k, v in d["options"].items()},
        None if snap is None else snap["id"], d["snapshot_count"], 0 if snap is None else snap["total_record_count"],
        d["file_count"], d["total_file_size"], d["files_per_level"], len(parts), all(p["compacted"] for p in parts),
        None if snap is None else snap["time_millis"],
    ]])


# -- DELETE FROM managed.db.t WHERE ... --------------------------------------------------------------------------
DELETE_COLUMNS: Columns = (("snapshot_id", "BIGINT"), ("deleted_rows", "BIGINT"))


def delete_where(args: Mapping[str, Any]) -> dict[str, Any]:
    """Delete the rows the predicates (a JSON list, ANDed: tablestore.spark.predicates) select, in one commit."""
    table = _table(args)
    predicate = args.get("predicate")
    nodes = predicates.parse(predicate if isinstance(predicate, str) else json.dumps(predicate))
    result = table.delete(predicates.conjunction(nodes, table.schema))
    return _result(DELETE_COLUMNS, [[result.snapshot_id, result.deleted_rows]])


# -- SELECT * FROM managed.db.`t$snapshots` / `t$files` ----------------------------------------------------------
SNAPSHOTS_COLUMNS: Columns = (
    ("snapshot_id", "BIGINT"), ("kind", "STRING"), ("commit_time", "TIMESTAMP"), ("total_record_count", "BIGINT"),
    ("delta_record_count", "BIGINT"), ("commit_user", "STRING"), ("commit_identifier", "BIGINT"),
    ("schema_id", "BIGINT"), ("log_offsets", "MAP<INT, BIGINT>"), ("delta_version", "BIGINT"),
    ("commit_duration_ms", "BIGINT"),
)
FILES_COLUMNS: Columns = (
    ("partition", "STRING"), ("bucket", "INT"), ("level", "INT"), ("file_name", "STRING"), ("record_count", "BIGINT"),
    ("file_size", "BIGINT"), ("min_sequence_number", "BIGINT"), ("max_sequence_number", "BIGINT"),
    ("deleted_record_count", "BIGINT"),
)
SYSTEM_TABLES = ("snapshots", "files", *system_tables.SYSTEM_TABLES)
_SQL_TYPES = {pa.int64(): "BIGINT", pa.int32(): "INT", pa.string(): "STRING", pa.bool_(): "BOOLEAN",
              pa.float64(): "DOUBLE", pa.list_(pa.string()): "ARRAY<STRING>",
              pa.map_(pa.string(), pa.string()): "MAP<STRING, STRING>",
              pa.map_(pa.int32(), pa.int64()): "MAP<INT, BIGINT>"}


def _arrow_result(table: pa.Table) -> dict[str, Any]:
    """An Arrow system table as a result: timestamps as epoch milliseconds; a column type the result protocol does
    not carry (dates, decimals, binary, ... of the table columns of `$audit_log` and `$latest_changes`) as its
    text."""
    columns: list[tuple[str, str]] = []
    values: list[list[Any]] = []
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_timestamp(field.type):
            columns.append((field.name, "TIMESTAMP"))
            column = column.cast(pa.timestamp("ms", tz=field.type.tz)).cast(pa.int64())
        elif field.type in _SQL_TYPES:
            columns.append((field.name, _SQL_TYPES[field.type]))
        else:
            columns.append((field.name, "STRING"))
            column = column.cast(pa.string())
        values.append(column.to_pylist())
    rows = zip(*values) if values else iter(())
    return _result(columns, ([dict(v) if isinstance(v, list) and t.startswith("MAP") else v
                              for v, (_, t) in zip(row, columns)] for row in rows))


def system_table(args: Mapping[str, Any]) -> dict[str, Any]:
    """The rows of `table$name` for name in SYSTEM_TABLES (with `schema_only`: no rows, for planning)."""
    name = args.get("name")
    if name not in SYSTEM_TABLES:
        raise TableStoreError(   # not TableNotFoundError: Spark would replace this message with its own
            f"table {_name(args)}${name} is not a system table: the system tables are "
            f"{', '.join('$' + n for n in SYSTEM_TABLES)}")
    table = _table(args)
    if name in system_tables.SYSTEM_TABLES:
        arrow = table.system_table(str(name))
        return _arrow_result(arrow.slice(0, 0) if args.get("schema_only") else arrow)
    columns = SNAPSHOTS_COLUMNS if name == "snapshots" else FILES_COLUMNS
    if args.get("schema_only"):
        return _result(columns, [])
    if name == "snapshots":
        return _result(columns, [[
            s.id, s.kind, s.time_millis, s.total_record_count, s.delta_record_count, s.commit_user,
            s.commit_identifier, s.schema_id, dict(s.log_offsets), s.delta_version, s.commit_duration_ms,
        ] for s in table.snapshots()])
    return _result(columns, [[
        _partition_name(f["partition"]), f["bucket"], f["level"], f["file"],  # type: ignore[arg-type]
        f["row_count"], f["file_size"], f["min_sequence_number"], f["max_sequence_number"], f["deleted_row_count"],
    ] for f in table.files()])


ACTIONS: dict[str, Action] = {
    "compact": compact,
    "compact_commit": compact_commit,
    "expire_snapshots": expire_snapshots,
    "expire_partitions": lambda args: _expire_partitions(_table(args), args),
    "describe_detail": describe_detail,
    "create_tag": lambda args: tags_sql.create_tag(_table(args), args),
    "delete_tag": lambda args: tags_sql.delete_tag(_table(args), args),
    "reset_consumer": lambda args: consumers_sql.reset_consumer(_table(args), args),
    "delete_where": delete_where,
    "system_table": system_table,
}
