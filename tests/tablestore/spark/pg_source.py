"""A real source for the CDC tests: the project's development PostgreSQL (tablestore/cdc/postgres.py) and a Kafka
Connect worker running Debezium's PostgreSQL connector (tablestore/cdc/connect.py), and the oracle: what Postgres
itself answers to SELECT, in the types the docs give for each PostgreSQL type (docs/cdc.md, "PostgreSQL types").

Ports are fixed per pytest-xdist worker (`gwK` moves them by 20*K, as tests/conftest.py does for the broker) and 30
above the defaults (tests/tablestore/test_cdc_devtools.py takes +10..+12). Run directories live under /tmp: as root,
postgres runs as an unprivileged user, which must be able to enter every parent of its directory."""
from __future__ import annotations

import datetime as dt
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from pathlib import Path
from typing import Any

from tablestore.cdc import connect, postgres

_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
SHIFT = 20 * int(_WORKER[2:]) if _WORKER.startswith("gw") else 0
PG_PORT = postgres.DEFAULT_PORT + 30 + SHIFT
CONNECT_PORT = connect.DEFAULT_PORT + 30 + SHIFT
P = "__debezium_unavailable_value"


@contextmanager
def server() -> Iterator[postgres.PostgresServer]:
    rdir = Path(tempfile.mkdtemp(prefix="tablestore-pgsrc-"))
    try:
        yield postgres.start(rdir, port=PG_PORT)
    finally:
        postgres.stop(rdir)
        shutil.rmtree(rdir, ignore_errors=True)


@contextmanager
def worker(bootstrap: str) -> Iterator[tuple[connect.ConnectWorker, Path]]:
    rdir = Path(tempfile.mkdtemp(prefix="tablestore-connectsrc-"))
    try:
        yield connect.start(rdir, port=CONNECT_PORT, bootstrap_servers=bootstrap), rdir
    finally:
        connect.stop(rdir)
        shutil.rmtree(rdir, ignore_errors=True)


class Source:
    """One database of the test server, and the connectors capturing it (each its own topic prefix and slot)."""

    def __init__(self, pg: postgres.PostgresServer, worker: connect.ConnectWorker) -> None:
        import psycopg

        self.pg = pg
        self.worker = worker
        self.db = f"src_{uuid.uuid4().hex[:8]}"
        postgres.create_database(pg, self.db)
        self.conn = psycopg.connect(pg.dsn(self.db), autocommit=True)
        self.connectors: list[str] = []

    def sql(self, *statements: str) -> None:
        for s in statements:
            self.conn.execute(s)   # type: ignore[arg-type]

    def rows(self, query: str) -> list[dict[str, Any]]:
        cur = self.conn.execute(query)   # type: ignore[arg-type]
        names = [d.name for d in cur.description or []]
        return [dict(zip(names, r)) for r in cur.fetchall()]

    def capture(self, tables: list[str] | None = None, **config: str) -> str:
        """A connector on this database (every table of `public`, tables created later too: a publication FOR ALL
        TABLES); its topic prefix. `config`: Debezium settings, `_` for `.` in the names."""
        prefix = f"p{uuid.uuid4().hex[:8]}"
        settings = {"publication.autocreate.mode": "all_tables" if tables is None else "filtered",
                    "skipped.operations": "none"}
        settings.update({k.replace("__", "-").replace("_", "."): v for k, v in config.items()})
        connect.register_postgres(self.worker.url, prefix, host="127.0.0.1", port=self.pg.port, user="postgres",
                                  password=None, dbname=self.db, topic_prefix=prefix, tables=tables,
                                  config=settings, wait_s=90)
        self.connectors.append(prefix)
        return prefix

    def close(self) -> None:
        for name in self.connectors:
            connect.delete_connector(self.worker.url, name)
        for slot in self.rows("SELECT slot_name FROM pg_replication_slots WHERE NOT active"):
            self.sql(f"SELECT pg_drop_replication_slot('{slot['slot_name']}')")
        self.conn.close()


def wait_for(condition: Any, timeout_s: float = 120, what: Any = "the condition") -> None:
    """Until `condition()`; `what` (text, or a function giving it) names it in the timeout's error."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what() if callable(what) else what}")
        time.sleep(0.3)


# -- the oracle: a PostgreSQL value as the managed table holds it (docs/cdc.md, "PostgreSQL types") -------------
MONTH_US = 30.4375 * 86400 * 1_000_000   # Debezium's MicroDuration: a month is 30.4375 days


def micros_of_day(t: dt.time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def interval_micros(months: int, days: int, seconds: Decimal) -> int:
    return round(months * MONTH_US + days * 86_400_000_000 + float(seconds) * 1_000_000)


def utc_time(t: dt.time) -> str:
    """A timetz as Debezium's ZonedTime gives it: the time in UTC, ISO, 'Z'."""
    offset = t.utcoffset() or dt.timedelta(0)
    moved = (dt.datetime.combine(dt.date(2000, 1, 1), t.replace(tzinfo=None)) - offset).time()
    text = moved.isoformat()
    if "." in text:
        text = text.rstrip("0")
    return text + "Z"
