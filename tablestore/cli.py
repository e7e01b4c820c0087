"""The `tablestore` command: a thin layer over the library. Every command takes `--output text|json`."""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable

from catalog import CatalogError
from filestore import FileStoreError
from logstore import LogStoreError
from tablestore.catalog import Catalog
from tablestore.errors import TableStoreError

WAREHOUSE_ENV = "TABLESTORE_WAREHOUSE"


def _emit(args: argparse.Namespace, value: Any, text: Callable[[Any], str]) -> None:
    if args.output == "json":
        print(json.dumps(value, indent=2, default=str))
    else:
        print(text(value))


def _catalog(args: argparse.Namespace) -> Catalog:
    warehouse = args.warehouse or os.environ.get(WAREHOUSE_ENV)
    if not warehouse:
        raise SystemExit(f"error: give --warehouse or set {WAREHOUSE_ENV}")
    return Catalog(warehouse)


def _describe_text(d: dict[str, Any]) -> str:
    lines = [f"table      {d['name']}", f"path       {d['path']}"]
    lines += [f"column     {c['name']}: {c['type']}{'' if c['nullable'] else ' NOT NULL'}" for c in d["columns"]]
    lines += [
        f"primary key  {', '.join(d['primary_key']) or '(none)'}",
        f"partitioned  {', '.join(d['partition_by']) or '(no)'}",
        f"buckets      {d['bucket']}",
    ]
    for key, value in d.get("log", {}).items():
        lines.append(f"log {key:<15}{value}")
    lines += [f"option     {k} = {v}" for k, v in sorted(d["options"].items())]
    snap = d["latest_snapshot"]
    lines.append("snapshot   (none)" if snap is None else
                 f"snapshot   {snap['id']} {snap['kind']} records={snap['total_record_count']}")
    lines.append(f"files      {d['file_count']} ({d['total_file_size']} bytes), per level {d['files_per_level']}")
    return "\n".join(lines)


def cmd_describe(args: argparse.Namespace) -> int:
    _emit(args, _catalog(args).get_table(args.table).describe(), _describe_text)
    return 0


def cmd_snapshots(args: argparse.Namespace) -> int:
    snaps = [s.to_dict() for s in _catalog(args).get_table(args.table).snapshots()]
    _emit(args, snaps, lambda ss: "\n".join(
        f"{s['id']:>6}  {s['kind']:<9} records={s['total_record_count']:<10} delta={s['delta_record_count']}"
        for s in ss) or "(no snapshots)")
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    sid = _catalog(args).get_table(args.table).compact(full=args.full)
    _emit(args, {"snapshot_id": sid}, lambda d: "nothing to compact" if d["snapshot_id"] is None
          else f"committed COMPACT snapshot {d['snapshot_id']}")
    return 0


def cmd_expire(args: argparse.Namespace) -> int:
    result = _catalog(args).get_table(args.table).expire_snapshots()
    _emit(args, {"expired": list(result.expired_snapshots), "deleted_files": result.deleted_files},
          lambda d: f"expired snapshots {d['expired'] or 'none'}, deleted {d['deleted_files']} files")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from tablestore.demo import run_demo

    run_demo(args.warehouse)
    return 0


def cmd_kafka(args: argparse.Namespace) -> int:
    from logstore import broker

    if args.action == "start":
        address = broker.start()
        _emit(args, {"bootstrap": address}, lambda d: d["bootstrap"])
        return 0
    if args.action == "stop":
        stopped = broker.stop()
        _emit(args, {"stopped": stopped}, lambda d: "stopped" if d["stopped"] else "not running")
        return 0
    running = broker.status()
    _emit(args, {"bootstrap": running}, lambda d: d["bootstrap"] or "down")
    return 0 if running else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tablestore", description="Managed tables: file store + log store.")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, func: Callable[[argparse.Namespace], int], help: str, table: bool = True) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help)
        p.add_argument("--warehouse", help=f"warehouse path or URL (default: ${WAREHOUSE_ENV})")
        p.add_argument("--output", choices=("text", "json"), default="text")
        if table:
            p.add_argument("table", help="database.table")
        p.set_defaults(func=func)
        return p

    command("describe", cmd_describe, "show a table's schema, options, snapshot and files")
    command("snapshots", cmd_snapshots, "list a table's snapshots")
    command("compact", cmd_compact, "run universal compaction on a table").add_argument(
        "--full", action="store_true", help="merge every sorted run of each bucket into one")
    command("expire", cmd_expire, "expire old snapshots and delete the files only they used")
    command("demo", cmd_demo, "run the file-store demo in a fresh warehouse", table=False)
    kafka = sub.add_parser("kafka", help="manage the project's own single-node Kafka broker (127.0.0.1)")
    kafka.add_argument("action", choices=("start", "stop", "status"))
    kafka.add_argument("--output", choices=("text", "json"), default="text")
    kafka.set_defaults(func=cmd_kafka)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (TableStoreError, CatalogError, FileStoreError, LogStoreError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
