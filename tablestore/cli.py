"""The `tablestore` command: a thin layer over the library.

Global options (`--warehouse`, `--output text|json`) work before or after the command, as in git or kubectl.
With `--output json` the result is JSON on stdout, and so is an error: {"error": message, "type": error class,
"exit_code": n}. With text output an error is one line on stderr, never a traceback.

Exit codes (also in the README):
  0  success
  1  usage: unknown command or option, bad argument, no warehouse given
  2  the table or its data: not found, invalid definition or option, damaged files, bad input
  3  the log store: Kafka unreachable or refusing; a development server failing, or its `status` when down
  4  a conflict with a concurrent writer: nothing was lost and nothing of this command was committed; retry it
141  the reader of the output went away (`tablestore describe ... | head`): the output stops there, no message
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, NoReturn, Sequence

from catalog import CATALOG_OPTIONS_ENV, CatalogError, environment_catalog_options, is_catalog_option
from filestore import CommitConflictError, CommitRetriesExhaustedError, FileStoreError
from logstore import LogStoreError
from tablestore import cli_devtools, cli_partition_expiry, cli_tags, maintenance
from tablestore.catalog import Catalog
from tablestore.cli_progress import progress_bar
from tablestore.errors import TableStoreError

WAREHOUSE_ENV = "TABLESTORE_WAREHOUSE"
EXIT_OK, EXIT_USAGE, EXIT_TABLE, EXIT_LOG, EXIT_CONFLICT = 0, 1, 2, 3, 4
EXIT_READER_GONE = 141  # as a shell reports a command stopped by SIGPIPE


class UsageError(Exception):
    """Bad command-line usage (exit 1)."""


class ConflictError(Exception):
    """A command lost a race with a concurrent writer (exit 4); the message says what to do."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)")


class _ReaderGone(Exception):
    """Whoever read our standard output went away (`tablestore describe ... | head`)."""


def _emit(args: argparse.Namespace, value: Any, text: Callable[[Any], str]) -> None:
    try:
        print(json.dumps(value, indent=2, default=str) if args.output == "json" else text(value))
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's last flush
    except BrokenPipeError:
        raise _ReaderGone() from None


def _reader_gone() -> int:
    """Stop quietly, as other command-line tools do: no message (there is nobody to read it), exit 141."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # so the final flush finds no pipe
    except (OSError, ValueError):
        pass
    return EXIT_READER_GONE


def _catalog(args: argparse.Namespace) -> Catalog:
    warehouse = args.warehouse or os.environ.get(WAREHOUSE_ENV)
    if not warehouse:
        raise UsageError(f"give --warehouse or set {WAREHOUSE_ENV}")
    return Catalog(warehouse)


def _partition_specs(args: argparse.Namespace) -> list[dict[str, str | None]]:
    """`--partition k=v[,k2=v2]` (repeatable) as {column: value} specs."""
    specs = []
    for text in args.partition or ():
        try:
            specs.append(maintenance.parse_partition_spec(text))
        except TableStoreError:
            raise UsageError(f"--partition {text!r}: give column=value[,column=value...]") from None
    return specs


def _partition_name(values: dict[str, Any]) -> str:
    return maintenance.partition_text(values) or "(table)"


def _describe_text(d: dict[str, Any]) -> str:
    lines = [f"table        {d['name']}", f"path         {d['path']}", f"file format  {d['file_format']}"]
    lines += [f"column       {c['name']}: {c['type']}{'' if c['nullable'] else ' NOT NULL'}" for c in d["columns"]]
    lines += [
        f"primary key  {', '.join(d['primary_key']) or '(none)'}",
        f"partitioned  {', '.join(d['partition_by']) or '(no)'}",
        f"buckets      {d['bucket']}",
    ]
    lines += [f"{'log ' + key:<12} {value}" for key, value in d.get("log", {}).items()]   # a space after any label
    lines += [f"option       {k} = {v}" for k, v in sorted(d["options"].items())]
    snap = d["latest_snapshot"]
    lines.append("snapshot     (none)" if snap is None else
                 f"snapshot     {snap['id']} {snap['kind']} records={snap['total_record_count']}")
    lines.append(f"modified     {d['last_modified'] or '(never)'}")
    lines.append(f"files        {d['file_count']} ({d['total_file_size']} bytes), per level {d['files_per_level']}")
    for p in d["partitions"]:
        runs = ", ".join(f"{b}: {n}" for b, n in p["sorted_runs"].items())
        lines.append(
            f"partition    {_partition_name(p['partition'])}  files={p['file_count']} bytes={p['total_file_size']} "
            f"runs per bucket {{{runs}}} {'compacted' if p['compacted'] else 'not compacted'} "
            f"modified {p['last_modified']}"
        )
    return "\n".join(lines)


def cmd_describe(args: argparse.Namespace) -> int:
    table = _catalog(args).get_table(args.table)
    specs = _partition_specs(args)
    detail = table.describe()
    if specs:
        detail["partitions"] = maintenance.partition_details(table, specs)
    _emit(args, detail, _describe_text)
    return EXIT_OK


def cmd_system(args: argparse.Namespace) -> int:
    rows = _catalog(args).get_table(args.table).system_table(args.name).to_pylist()
    _emit(args, rows, lambda rs: "\n".join("  ".join(f"{k}={v}" for k, v in r.items()) for r in rs) or "(no rows)")
    return EXIT_OK


def cmd_snapshots(args: argparse.Namespace) -> int:
    snaps = [s.to_dict() for s in _catalog(args).get_table(args.table).snapshots()]
    _emit(args, snaps, lambda ss: "\n".join(
        f"{s['id']:>6}  {s['kind']:<9} records={s['total_record_count']:<10} delta={s['delta_record_count']}"
        for s in ss) or "(no snapshots)")
    return EXIT_OK


def _compact_text(d: dict[str, Any]) -> str:
    b, a = d["before"], d["after"]
    head = (f"nothing to compact in {d['table']}" if d["snapshot_id"] is None
            else f"compacted {d['table']} in {d['seconds']:.2f} s: COMPACT snapshot {d['snapshot_id']}")
    return "\n".join([
        head,
        f"  files                  {b['files']} -> {a['files']}",
        f"  bytes                  {b['bytes']} -> {a['bytes']}",
        f"  sorted runs per bucket max {b['max_runs_per_bucket']} -> {a['max_runs_per_bucket']} "
        f"({a['buckets_with_one_run']} of {a['buckets']} buckets in one run)",
    ])


def cmd_compact(args: argparse.Namespace) -> int:
    table = _catalog(args).get_table(args.table)
    specs = _partition_specs(args)
    try:
        with progress_bar(enabled=args.output == "text", description=f"compacting {table.name}") as progress:
            report = maintenance.compact(table, full=args.full, partitions=specs, progress=progress)
    except (CommitConflictError, CommitRetriesExhaustedError) as e:
        raise ConflictError(
            f"compaction of {table.name} lost a race with a concurrent writer ({e}). Nothing was lost: the "
            f"compaction was not committed and the table holds everything the writers committed. Retrying is safe: "
            f"run `tablestore compact {table.name}` again."
        ) from None
    _emit(args, report, _compact_text)
    return EXIT_OK


def cmd_expire(args: argparse.Namespace) -> int:
    result = _catalog(args).get_table(args.table).expire_snapshots(retain_last=args.retain_last)
    _emit(args, {"expired": list(result.expired_snapshots), "deleted_files": result.deleted_files},
          lambda d: f"expired snapshots {d['expired'] or 'none'}, deleted {d['deleted_files']} files")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from tablestore.cli_demo import run

    return run(args, UsageError)


def cmd_sql(args: argparse.Namespace) -> int:
    from tablestore.spark.shell import run_spark_sql, spark_sql_command

    warehouse = args.warehouse or os.environ.get(WAREHOUSE_ENV)
    if not warehouse:
        raise UsageError(f"give --warehouse or set {WAREHOUSE_ENV}")
    extra = list(args.spark_args or [])
    if extra[:1] == ["--"]:
        extra = extra[1:]
    return run_spark_sql(spark_sql_command(warehouse=warehouse, execute=args.execute, file=args.file, extra=extra,
                                           verbose=args.verbose), verbose=args.verbose)


def cmd_ingest(args: argparse.Namespace) -> int:
    from tablestore import cli_ingest

    return cli_ingest.run(args, UsageError)


def cmd_ingest_database(args: argparse.Namespace) -> int:
    from tablestore import cli_ingest

    return cli_ingest.run_database(args, UsageError)


def cmd_service(args: argparse.Namespace) -> int:
    from tablestore import cli_service

    return cli_service.run(args, _emit, UsageError)


def cmd_kafka(args: argparse.Namespace) -> int:
    from logstore import broker

    data_dir = Path(args.dir) if args.dir else None
    if args.action == "start":
        address = broker.start(data_dir, args.port)
        _emit(args, {"bootstrap": address}, lambda d: d["bootstrap"])
        return EXIT_OK
    if args.action == "stop":
        stopped = broker.stop(data_dir)
        _emit(args, {"stopped": stopped}, lambda d: "stopped" if d["stopped"] else "not running")
        return EXIT_OK
    running = broker.status(data_dir)
    _emit(args, {"bootstrap": running}, lambda d: d["bootstrap"] or "down")
    return EXIT_OK if running else EXIT_LOG


def _add_global_options(parser: argparse.ArgumentParser) -> None:
    """On the top-level parser and on every command, with no default, so a value given anywhere survives."""
    group = parser.add_argument_group("global options (before or after the command)")
    group.add_argument("--warehouse", default=argparse.SUPPRESS,
                       help=f"warehouse path or URL (default: ${WAREHOUSE_ENV})")
    group.add_argument("--output", choices=("text", "json"), default=argparse.SUPPRESS,
                       help="text (default) or json, also for errors")
    group.add_argument("--option", action="append", metavar="KEY=VALUE", default=argparse.SUPPRESS,
                       help="a catalog option, e.g. s3.endpoint=http://127.0.0.1:8333 (repeatable; docs/options.md); "
                            "unset: $TABLESTORE_CATALOG_OPTIONS (JSON), then the AWS environment")


DEVELOPMENT_HELP = """development helpers (for the demo and the tests, not for production):
  kafka {start,stop,status} [--port PORT] [--dir DIR]   the project's own single-node Kafka broker
""" + cli_devtools.HELP + "\n"
EXIT_CODES_HELP = """exit codes:
  0  success
  1  usage: unknown command or option, bad argument, no warehouse given
  2  the table or its data: not found, invalid definition or option, damaged files, bad input
  3  the log store: Kafka unreachable or refusing (kafka status: the broker is down)
  4  a conflict with a concurrent writer: nothing was lost, nothing was committed; retrying is safe
141  the reader of the output went away (e.g. piped into `head`): the output stops there, with no message"""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="tablestore", description="Managed tables: file store + log store.",
                     epilog=DEVELOPMENT_HELP + EXIT_CODES_HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True, metavar="command")

    def command(name: str, func: Callable[[argparse.Namespace], int], help: str,
                table: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=help, epilog=EXIT_CODES_HELP,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
        _add_global_options(p)
        if table:
            p.add_argument("table", help="database.table")
        p.set_defaults(func=func)
        return p

    partition_help = ("only the partition column=value[,column=value...] (value __DEFAULT_PARTITION__: the null "
                      "partition); repeatable")
    command("describe", cmd_describe, "show a table's schema, options, snapshot, files and partitions").add_argument(
        "--partition", action="append", metavar="K=V", help=partition_help)
    command("snapshots", cmd_snapshots, "list a table's snapshots")
    from tablestore.system_tables import SYSTEM_TABLES

    command("system", cmd_system, "show a system table of a table, as Paimon's (SQL: db.`t$name`)").add_argument(
        "name", choices=sorted(SYSTEM_TABLES), help="the system table")
    compact = command("compact", cmd_compact, "run universal compaction on a table and report what it did")
    compact.add_argument("--full", action="store_true", help="merge every sorted run of each bucket into one")
    compact.add_argument("--partition", action="append", metavar="K=V", help=partition_help)
    command("expire", cmd_expire, "expire old snapshots and delete the files only they used").add_argument(
        "--retain-last", type=int, metavar="N", help="keep the newest N snapshots (default: the table's options)")
    cli_partition_expiry.add_command(command, _catalog, _emit)
    cli_tags.add_commands(command, _catalog, _emit)
    from tablestore.cli_demo import add_arguments as demo_arguments

    demo_arguments(command("demo", cmd_demo, "run the CDC pipeline demo: a PostgreSQL database captured by Debezium "
                           "into Kafka, kept in managed tables by one Spark streaming job, its changes flowing on "
                           "downstream, checked end to end against PostgreSQL", table=False))
    sql = command("sql", cmd_sql, "open PySpark's spark-sql shell with the managed catalog (managed.<db>.<table>)",
                  table=False)
    given = sql.add_mutually_exclusive_group()
    given.add_argument("-e", dest="execute", metavar="SQL", help="run these statements and exit")
    given.add_argument("-f", dest="file", metavar="FILE", help="run the statements of this file and exit")
    sql.add_argument("--verbose", action="store_true", help="print the JVM stack of a failed statement (default: its "
                     "message only; the stack goes to logs/sql.log in the cache directory, ~/.cache/tablestore)")
    sql.add_argument("spark_args", nargs=argparse.REMAINDER, help="after --: more spark-sql arguments")
    from tablestore.cli_ingest import add_arguments as ingest_arguments

    ingest_arguments(command("ingest", cmd_ingest, "keep a table up to date from a database's change stream in "
                             "Kafka (Debezium, canal, Maxwell or upsert JSON): a Spark streaming job, exactly once"))
    from tablestore.cli_ingest import add_database_arguments

    add_database_arguments(command("ingest-database", cmd_ingest_database, "keep every table of a source database "
                                   "up to date from its change streams in Kafka: one Spark job, exactly once",
                                   table=False))
    kafka = command("kafka", cmd_kafka, "development helper: the project's own single-node Kafka broker "
                    "(127.0.0.1), for the demo and the tests; not for production", table=False)
    kafka.add_argument("action", choices=("start", "stop", "status"))
    from logstore import broker

    kafka.add_argument("--port", type=int, metavar="PORT",
                       help=f"the broker's port, start only (default: $TABLESTORE_KAFKA_PORT or "
                            f"{broker.DEFAULT_BROKER_PORT}; the controller takes PORT + 1)")
    kafka.add_argument("--dir", metavar="DIR",
                       help="the broker's state, logs and data (default: $TABLESTORE_KAFKA_DIR or "
                            ".cache/kafka-run in the repository); stop and status look there too")
    from tablestore import cli_service

    cli_service.add_arguments(command("service", cmd_service, cli_service.HELP, table=False))
    cli_devtools.add_commands(command, _add_global_options, _emit)
    return parser


def _wants_json(argv: Sequence[str]) -> bool:
    """--output json anywhere in argv (for errors found before or while parsing)."""
    for i, arg in enumerate(argv):
        if arg == "--output=json" or (arg == "--output" and i + 1 < len(argv) and argv[i + 1] == "json"):
            return True
    return False


_SQLSTATE = re.compile(r"\s*SQLSTATE: [0-9A-Z]{5}\b")
"""Spark's error class code (P0001 of every raise_error) means nothing to a user of the CLI."""


def _failure(argv: Sequence[str], error: BaseException, code: int) -> int:
    message = _SQLSTATE.sub("", str(error).strip().replace("\n", " ")) or type(error).__name__
    logs = sys.modules.get("tablestore.spark.logs")   # a Spark session was started: its log holds the stacks
    log = logs.active_log() if logs is not None else None   # type: ignore[attr-defined]
    if log is not None:
        message += f" (Spark's log: {log})"
    if _wants_json(argv):
        print(json.dumps({"error": message, "type": type(error).__name__, "exit_code": code}))
    else:
        print(f"error: {message}", file=sys.stderr)
    return code


def _exit_code(error: BaseException) -> int | None:
    for types, code in _ERROR_CODES:
        if isinstance(error, types):
            return code
    return None


_ERROR_CODES: tuple[tuple[tuple[type[BaseException], ...], int], ...] = (
    ((UsageError,), EXIT_USAGE),
    ((ConflictError,), EXIT_CONFLICT),
    ((LogStoreError, cli_devtools.DevServiceError), EXIT_LOG),
    ((TableStoreError, CatalogError, FileStoreError), EXIT_TABLE),
    ((OSError,), EXIT_TABLE),  # the warehouse itself: permissions, a full disk, an unreachable object store
)


def _export_catalog_options(pairs: Sequence[str]) -> None:
    """`--option k=v` into TABLESTORE_CATALOG_OPTIONS, which every catalog of this process and of the Spark jobs
    and services it starts reads (catalog.fs_options)."""
    if not pairs:
        return
    given = environment_catalog_options()
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"--option {pair!r}: expected KEY=VALUE")
        if not is_catalog_option(key.strip()):
            raise UsageError(f"--option {key!r} is not a catalog option (s3.endpoint, s3.access-key, ...: "
                             "docs/options.md); table options go to create_table or SQL")
        given[key.strip()] = value
    os.environ[CATALOG_OPTIONS_ENV] = json.dumps(given, sort_keys=True)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    before = os.environ.get(CATALOG_OPTIONS_ENV)
    try:
        args = build_parser().parse_args(argv)
        args.warehouse = getattr(args, "warehouse", None)
        args.output = getattr(args, "output", "text")
        pairs = getattr(args, "option", None) or []   # `service` also takes table options (tablestore.cli_service)
        _export_catalog_options([p for p in pairs if not getattr(args, "table_options_too", False)
                                 or is_catalog_option(p.partition("=")[0].strip())])
        return int(args.func(args))
    except _ReaderGone:
        return _reader_gone()
    except Exception as e:  # noqa: BLE001 - translated once, here; anything else is a bug and keeps its traceback
        code = _exit_code(e)
        if code is None:
            raise
        return _failure(argv, e, code)
    finally:   # main() called in-process (tests, embedding) leaves the environment as it found it
        if before is None:
            os.environ.pop(CATALOG_OPTIONS_ENV, None)
        else:
            os.environ[CATALOG_OPTIONS_ENV] = before


if __name__ == "__main__":
    sys.exit(main())
