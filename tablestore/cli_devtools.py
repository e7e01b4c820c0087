"""`tablestore postgres ...` and `tablestore connect ...`: the development PostgreSQL server and Kafka Connect worker
with Debezium (tablestore/cdc/postgres.py and tablestore/cdc/connect.py do the work), for the demo, the tests and
trying CDC on one machine; not for production.

    tablestore postgres start|stop|status [--port 15432] [--dir DIR]
    tablestore connect start|stop|status [--port 18083] [--dir DIR] [--bootstrap-servers HOST:PORT]
    tablestore connect register-postgres NAME --database DB [--host H] [--port 15432] [--user U] [--password P]
        [--topic-prefix P] [--table T ...] [--partitions N] [--config K=V ...] [--url http://127.0.0.1:18083]

`status` exits 3 when the server is down, as `tablestore kafka status` does; so do the servers' own errors.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Callable

from tablestore.cdc import connect, postgres
from tablestore.cdc.dev_process import DevServiceError

__all__ = ["DevServiceError", "HELP", "add_commands"]

Emit = Callable[[argparse.Namespace, Any, Callable[[Any], str]], None]
Command = Callable[..., argparse.ArgumentParser]

EXIT_OK, EXIT_DOWN = 0, 3

HELP = """\
  postgres {start,stop,status} [--port PORT] [--dir DIR]  a PostgreSQL server with logical decoding on
  connect {start,stop,status} [--port PORT] [--dir DIR] [--bootstrap-servers HOST:PORT]
                                                       a Kafka Connect worker with Debezium's PostgreSQL connector
  connect register-postgres NAME --database DB [...]   capture a database's tables into Kafka topics
"""


def add_commands(command: Command, global_options: Callable[[argparse.ArgumentParser], None], emit: Emit) -> None:
    """Register `postgres` and `connect` with the CLI's `command(name, func, help, table=False)` helper."""
    pg = command("postgres", _postgres(emit), "development helper: a PostgreSQL server (127.0.0.1, logical decoding "
                 "on, superuser postgres without password; not crash-safe) for trying CDC; not for production",
                 table=False)
    pg.add_argument("action", choices=("start", "stop", "status"))
    pg.add_argument("--port", type=int, metavar="PORT", help=f"the server's port, start only (default: "
                    f"${postgres.PORT_ENV} or {postgres.DEFAULT_PORT})")
    pg.add_argument("--dir", metavar="DIR", help=f"the server's state, log and data (default: ${postgres.DIR_ENV} or "
                    ".cache/postgres-run in the repository); stop and status look there too")

    cn = command("connect", lambda args: EXIT_OK, "development helper: a Kafka Connect worker (127.0.0.1, distributed "
                 "mode) with Debezium's PostgreSQL connector; not for production", table=False)
    actions = cn.add_subparsers(dest="action", required=True, metavar="action")
    for action, text in (("start", "start the worker (fetching its jars with mvn the first time)"),
                         ("stop", "stop the worker"), ("status", "the worker's REST URL, or exit 3 if it is down")):
        p = actions.add_parser(action, help=text, description=text)
        global_options(p)
        p.add_argument("--port", type=int, metavar="PORT", help=f"the REST API's port, start only (default: "
                       f"${connect.PORT_ENV} or {connect.DEFAULT_PORT})")
        p.add_argument("--dir", metavar="DIR", help=f"the worker's state and log (default: ${connect.DIR_ENV} or "
                       ".cache/connect-run in the repository); stop and status look there too")
        p.add_argument("--bootstrap-servers", metavar="HOST:PORT", help="the Kafka cluster, start only (default: the "
                       "project's development broker, `tablestore kafka start`)")
        p.set_defaults(func=_connect(emit))
    text = ("register (or update) a Debezium PostgreSQL connector and wait until it runs: topics "
            "<topic-prefix>.<schema>.<table>")
    reg = actions.add_parser("register-postgres", help=text, description=text)
    global_options(reg)
    reg.add_argument("name", metavar="NAME", help="the connector's name (its replication slot and publication are "
                     "named after it)")
    reg.add_argument("--database", required=True, metavar="DB", help="the database to capture")
    reg.add_argument("--host", default="127.0.0.1", help="the database's host, as the worker reaches it "
                     "(default: %(default)s)")
    reg.add_argument("--port", type=int, default=None, metavar="PORT",
                     help=f"the database's port (default: ${postgres.PORT_ENV} or {postgres.DEFAULT_PORT})")
    reg.add_argument("--user", default=postgres.SUPERUSER, help="(default: %(default)s)")
    reg.add_argument("--password", default=None, help="(default: none, as the development server needs)")
    reg.add_argument("--topic-prefix", metavar="P", help="the topics' prefix (default: the database's name)")
    reg.add_argument("--schema", action="extend", nargs="+", metavar="S", dest="schemas",
                     help="the schemas to capture (default: public)")
    reg.add_argument("--table", action="extend", nargs="+", metavar="T", dest="tables",
                     help="only these tables (schema.table, or a table of the schemas); repeatable")
    reg.add_argument("--partitions", type=int, default=1, metavar="N",
                     help="partitions of the topics the connector creates (default: %(default)s)")
    reg.add_argument("--config", action="extend", nargs="+", type=_pair, metavar="K=V", default=[],
                     help="any other connector setting, overriding the defaults; repeatable")
    reg.add_argument("--url", metavar="URL", help=f"the worker's REST API (default: http://127.0.0.1:PORT, PORT "
                     f"${connect.PORT_ENV} or {connect.DEFAULT_PORT})")
    reg.set_defaults(func=_register(emit))


def _dir(args: argparse.Namespace) -> Path | None:
    return Path(args.dir) if args.dir else None


def _postgres(emit: Emit) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        if args.action == "stop":
            stopped = postgres.stop(_dir(args))
            emit(args, {"stopped": stopped}, lambda d: "stopped" if d["stopped"] else "not running")
            return EXIT_OK
        server = postgres.start(_dir(args), args.port) if args.action == "start" else postgres.status(_dir(args))
        found = {"dsn": None} if server is None else {"dsn": server.dsn(), "url": server.url(), "host": server.host,
                                                      "port": server.port, "user": server.user, "pid": server.pid}
        emit(args, found, lambda d: d["dsn"] or "down")
        return EXIT_OK if server is not None else EXIT_DOWN
    return run


def _connect(emit: Emit) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        if args.action == "stop":
            stopped = connect.stop(_dir(args))
            emit(args, {"stopped": stopped}, lambda d: "stopped" if d["stopped"] else "not running")
            return EXIT_OK
        worker = (connect.start(_dir(args), args.port, args.bootstrap_servers) if args.action == "start"
                  else connect.status(_dir(args)))
        found = {"url": None} if worker is None else {"url": worker.url, "port": worker.port, "pid": worker.pid,
                                                      "bootstrap": worker.bootstrap, "group_id": worker.group_id}
        emit(args, found, lambda d: d["url"] or "down")
        return EXIT_OK if worker is not None else EXIT_DOWN
    return run


def _pair(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{item!r}: give key=value")
    return key.strip(), value


def _register(emit: Emit) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        prefix = args.topic_prefix or args.database
        state = connect.register_postgres(
            args.url or connect.default_url(), args.name, host=args.host,
            port=args.port if args.port is not None else postgres.default_port(), user=args.user,
            password=args.password, dbname=args.database, topic_prefix=prefix,
            schemas=tuple(args.schemas or ("public",)), tables=args.tables, partitions=args.partitions,
            config=dict(args.config))
        tasks = ", ".join(f"task {t['id']} {t['state']}" for t in state.get("tasks", []))
        emit(args, state, lambda d: f"{d['name']} {d['connector']['state']} ({tasks}); topics "
             f"{prefix}.<schema>.<table>")
        return EXIT_OK
    return run
