"""`tablestore create-tag db.t NAME [--snapshot N]` and `tablestore delete-tag db.t NAME`: `Table.create_tag` /
`Table.delete_tag` from the command line, beside `expire` (tablestore.tags); `tablestore system db.t tags` lists
them."""
from __future__ import annotations

import argparse
from typing import Any, Callable

from tablestore.catalog import Catalog
from tablestore.cli_devtools import Command, Emit

EXIT_OK = 0


def add_commands(command: Command, catalog_of: Callable[[argparse.Namespace], Catalog], emit: Emit) -> None:
    """Register `create-tag` and `delete-tag` with the CLI's `command(name, func, help)` helper."""
    def create(args: argparse.Namespace) -> int:
        info = catalog_of(args).get_table(args.table).create_tag(args.name, args.snapshot)
        emit(args, info.to_dict(), lambda d: f"tagged snapshot {d['snapshot_id']} of {args.table} as {d['name']}")
        return EXIT_OK

    def delete(args: argparse.Namespace) -> int:
        catalog_of(args).get_table(args.table).delete_tag(args.name)
        result: dict[str, Any] = {"table": args.table, "deleted": args.name}
        emit(args, result, lambda d: f"deleted tag {d['deleted']} of {d['table']}")
        return EXIT_OK

    p = command("create-tag", create, "tag a snapshot: it stays readable (read(tag=), VERSION AS OF 'name') after "
                "expiry")
    p.add_argument("name", help="the tag's name (not a number, no '/')")
    p.add_argument("--snapshot", type=int, metavar="ID", help="the snapshot to tag (default: the latest)")
    command("delete-tag", delete, "delete a tag and the files only its expired snapshot used").add_argument(
        "name", help="the tag's name")
