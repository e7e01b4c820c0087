"""`tablestore expire-partitions db.t --warehouse W [--expiration-time 7d] [--timestamp-pattern ...]
[--timestamp-formatter ...] [--now ISO]`: `Table.expire_partitions` from the command line, beside `compact` and
`expire` (tablestore.partition_expiry)."""
from __future__ import annotations

import argparse
import datetime as dt
from typing import Any, Callable

from tablestore.catalog import Catalog
from tablestore.cli_devtools import Command, Emit
from tablestore.errors import TableStoreError

EXIT_OK = 0


def _text(d: dict[str, Any]) -> str:
    names = [",".join(f"{k}={v}" for k, v in p.items()) for p in d["expired"]]
    return f"expired partitions of {d['table']}: {'; '.join(names) or 'none'}"


def add_command(command: Command, catalog_of: Callable[[argparse.Namespace], Catalog], emit: Emit) -> None:
    """Register `expire-partitions` with the CLI's `command(name, func, help)` helper."""
    def run(args: argparse.Namespace) -> int:
        table = catalog_of(args).get_table(args.table)
        try:
            now = None if args.now is None else dt.datetime.fromisoformat(args.now)
        except ValueError:
            raise TableStoreError(f"--now {args.now!r} is not an ISO time (e.g. 2024-03-01T12:00)") from None
        expired = table.expire_partitions(now, expiration_time=args.expiration_time,
                                          timestamp_pattern=args.timestamp_pattern,
                                          timestamp_formatter=args.timestamp_formatter)
        emit(args, {"table": table.name, "expired": expired}, _text)
        return EXIT_OK

    p = command("expire-partitions", run, "drop the partitions older than partition.expiration-time (their time read "
                "from their values), in one commit")
    p.add_argument("--expiration-time", metavar="DURATION", help="e.g. '7 d' (default: the table's option)")
    p.add_argument("--timestamp-pattern", metavar="PATTERN", help="e.g. '$dt $hour:00:00' (default: the table's "
                   "option, else the first partition column)")
    p.add_argument("--timestamp-formatter", metavar="FORMAT", help="e.g. 'yyyyMMdd' (default: the table's option, "
                   "else 'yyyy-MM-dd HH:mm:ss' or 'yyyy-MM-dd')")
    p.add_argument("--now", metavar="ISO-TIME", help="the time to compare with (default: the local time now)")
