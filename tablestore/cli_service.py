"""`tablestore service [start|stop|status]`: the service that keeps a warehouse's tables healthy (tablestore.service).

    tablestore service --warehouse W [--port 8765] [--option k=v ...] [--tables REGEX] [--detach] [--dir DIR]
                       [--master spark://HOST:7077 [--spark-min-mb 256]]
    tablestore service stop [--dir DIR]
    tablestore service status [--dir DIR]        exit 3 when it is down, as `tablestore kafka status`

`--option` takes table options (they override every table's own for the service's duties, e.g.
`snapshot.time-retained=1 h`) and catalog options (`s3.endpoint=...`) alike.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from catalog import is_catalog_option

Emit = Callable[[argparse.Namespace, Any, Callable[[Any], str]], None]
EXIT_OK, EXIT_DOWN = 0, 3

HELP = ("keep every table of a warehouse healthy: dedicated compaction of write-only tables, snapshot expiry, "
        "orphan-file removal, partition expiry, with a lease per table (safe to run twice) and /metrics")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=("start", "stop", "status"), default="start",
                   help="start (the default: in the foreground unless --detach), stop, or status")
    p.add_argument("--port", type=int, default=None, metavar="PORT",
                   help="the HTTP port of /metrics on 127.0.0.1 (default: 8765)")
    p.add_argument("--tables", metavar="REGEX", help="only the tables whose db.table matches REGEX (whole)")
    p.add_argument("--detach", action="store_true", help="start in the background and return once it serves")
    p.add_argument("--dir", metavar="DIR", help="the service's state and log (default: $TABLESTORE_SERVICE_DIR "
                   "or ~/.cache/tablestore/service-run); stop and status look there too")
    p.add_argument("--lease-timeout", type=float, default=60.0, metavar="S",
                   help="seconds a table's lease lasts unless renewed: how soon another service takes over the "
                        "tables of one that died (default: %(default)s)")
    p.add_argument("--interval", type=float, default=10.0, metavar="S",
                   help="seconds between compaction checks of write-only tables (default: %(default)s)")
    p.add_argument("--expire-interval", type=float, default=60.0, metavar="S",
                   help="seconds between snapshot expiries of a table (default: %(default)s)")
    p.add_argument("--orphan-interval", type=float, default=3600.0, metavar="S",
                   help="seconds between orphan-file removals of a table (default: %(default)s)")
    p.add_argument("--master", metavar="URL", help="a Spark master (spark://host:7077): write-only tables of at "
                   "least --spark-min-mb compact as Spark jobs on that cluster (CALL managed.sys.compact on the "
                   "executors); smaller ones, and all without --master, in the service's process")
    p.add_argument("--spark-min-mb", type=float, default=256.0, metavar="MB",
                   help="with --master, the live data size from which a table compacts on the cluster "
                        "(default: %(default)s)")
    p.set_defaults(table_options_too=True)


def table_overrides(pairs: list[str]) -> dict[str, str]:
    """The `--option` pairs that are table options (the catalog's went to the environment, tablestore.cli)."""
    found = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        if not is_catalog_option(key.strip()):
            found[key.strip()] = value
    return found


def _command(args: argparse.Namespace) -> list[str]:
    """The foreground command of the same service, for a background start."""
    cmd = ["service", "--warehouse", args.warehouse, "--lease-timeout", str(args.lease_timeout), "--interval",
           str(args.interval), "--expire-interval", str(args.expire_interval), "--orphan-interval",
           str(args.orphan_interval)]
    for pair in getattr(args, "option", None) or []:
        cmd += ["--option", pair]
    for flag, value in (("--port", args.port), ("--tables", args.tables), ("--dir", args.dir),
                        ("--master", args.master), ("--spark-min-mb", args.spark_min_mb)):
        if value is not None:
            cmd += [flag, str(value)]
    return cmd


def run(args: argparse.Namespace, emit: Emit, usage_error: type[Exception]) -> int:
    from tablestore.service import Intervals, Service, ServiceConfig, process

    data_dir = Path(args.dir) if args.dir else None
    if args.action == "stop":
        stopped = process.stop(data_dir)
        emit(args, {"stopped": stopped}, lambda d: "stopped" if d["stopped"] else "not running")
        return EXIT_OK
    if args.action == "status":
        found = process.describe(process.status(data_dir))
        emit(args, found, lambda d: f"{d['url']} ({d['warehouse']}, pid {d['pid']})" if d["url"] else "down")
        return EXIT_OK if found["url"] else EXIT_DOWN
    if not args.warehouse:
        raise usage_error("give --warehouse or set TABLESTORE_WAREHOUSE")
    port = args.port if args.port is not None else process.DEFAULT_PORT
    if args.detach:
        running = process.start(_command(args), data_dir)
        emit(args, process.describe(running), lambda d: f"{d['metrics']} (pid {d['pid']})")
        return EXIT_OK
    config = ServiceConfig(args.warehouse, table_overrides(getattr(args, "option", None) or []), args.tables,
                           args.lease_timeout, Intervals(args.interval, args.expire_interval, args.orphan_interval),
                           master=args.master, spark_min_bytes=int(args.spark_min_mb * (1 << 20)))
    service = Service(config)
    process.serve(service, port, data_dir, ready=lambda state: emit(
        args, process.describe(state), lambda d: f"serving {d['metrics']} (pid {d['pid']}); stop with Ctrl-C or "
        f"`tablestore service stop`"))
    return EXIT_OK
