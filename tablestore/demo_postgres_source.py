"""The source of `tablestore demo` (tablestore/demo_postgres.py): the services it needs and the per-run things it
makes in them, all given back at the end.

`open()`, in order:
1. the Kafka broker: `--bootstrap-servers` as given, else the project's own (logstore.broker), started if it is
   not running;
2. the development PostgreSQL (tablestore.cdc.postgres) and the Kafka Connect worker with Debezium
   (tablestore.cdc.connect, its jars fetched once), each started if it is not running; a running worker must write
   to that Kafka cluster;
3. a fresh database `shop_<6 hex>` with the shop's schema and first rows (tablestore/demo_postgres_workload.py);
4. a Debezium connector of its own (`shopdemo_<same hex>`: its name, topic prefix, replication slot and
   publication), FOR ALL TABLES so that a table created later is captured at once.

`close()` undoes them in the reverse order and never raises (what it could not undo is returned, one line each):
the connector, its replication slot, the database, the topics `<prefix>.*`, then the services it started.
"""
from __future__ import annotations

import logging
import secrets
import time
from typing import Callable

from confluent_kafka.admin import AdminClient

from logstore import broker
from tablestore import demo_postgres_workload as workload
from tablestore.cdc import connect, postgres
from tablestore.cdc.dev_process import DevServiceError

log = logging.getLogger(__name__)

CAPTURE = {"publication.autocreate.mode": "all_tables", "skipped.operations": "none"}
"""Debezium settings: a publication FOR ALL TABLES (a table created later is captured at once); TRUNCATE too."""


class DemoSourceError(DevServiceError):
    """The demo's source cannot be set up as asked (a running worker writing elsewhere); says what to do."""


class DemoSource:
    """The services and the per-run database, connector and topics of one demo (see the module docstring)."""

    def __init__(self, *, bootstrap_servers: str | None = None, postgres_port: int | None = None,
                 connect_port: int | None = None, say: Callable[[str], None] = print) -> None:
        run = secrets.token_hex(3)
        self.database = f"shop_{run}"
        self.prefix = f"shopdemo_{run}"
        """The connector's name and its topics' prefix: `<prefix>.public.<table>`."""
        self._given_bootstrap = bootstrap_servers
        self._ports = (postgres_port, connect_port)
        self._say = say
        self._started: list[str] = []
        self._created: list[str] = []
        self.bootstrap = ""
        self.server: postgres.PostgresServer | None = None
        self.worker: connect.ConnectWorker | None = None

    @property
    def topic_pattern(self) -> str:
        return rf"{self.prefix}\.public\..*"

    def dsn(self) -> str:
        assert self.server is not None
        return self.server.dsn(self.database)

    def started(self) -> list[str]:
        """The services this demo started (and stops at the end)."""
        return list(self._started)

    def open(self) -> None:
        """Steps 1-4 of the module docstring; DevServiceError (or a subclass) when a service cannot start."""
        self.bootstrap = self._given_bootstrap or broker.status() or ""
        if not self.bootstrap:
            self.bootstrap = broker.start()
            self._started.append("kafka")
        self.server = postgres.status()
        if self.server is None:
            self.server = postgres.start(port=self._ports[0])
            self._started.append("postgres")
        self.worker = connect.status()
        if self.worker is None:
            # start() fetches the jars first, once (connect.ensure_jars)
            self.worker = connect.start(port=self._ports[1], bootstrap_servers=self.bootstrap)
            self._started.append("connect")
        elif self.worker.bootstrap != self.bootstrap:
            raise DemoSourceError(
                f"the Kafka Connect worker at {self.worker.url} writes to Kafka at {self.worker.bootstrap}, not at "
                f"{self.bootstrap}: stop it (`tablestore connect stop`) or give --bootstrap-servers "
                f"{self.worker.bootstrap}")
        self._say(f"kafka {self.bootstrap}, postgresql {self.server.host}:{self.server.port}, kafka connect "
                  f"{self.worker.url}" + (f" (started: {', '.join(self._started)})" if self._started else ""))
        postgres.create_database(self.server, self.database, exist_ok=False)
        self._created.append("database")
        workload.create_shop(self.dsn())
        self._created.append("connector")   # before registering: a half-registered one is deleted too
        connect.register_postgres(self.worker.url, self.prefix, host=self.server.host, port=self.server.port,
                                  user=self.server.user, password=None, dbname=self.database,
                                  topic_prefix=self.prefix, config=dict(CAPTURE), wait_s=90)
        self._say(f"database {self.database}: customers, products, orders; Debezium connector {self.prefix} "
                  f"capturing it into topics {self.prefix}.public.*")

    def close(self) -> list[str]:
        """Everything `open` made or started, removed or stopped; what could not be, one line each."""
        problems: list[str] = []
        steps: list[tuple[str, Callable[[], object]]] = []
        if "connector" in self._created and self.worker is not None:
            worker_url = self.worker.url
            steps.append(("deleting the connector", lambda: connect.delete_connector(worker_url, self.prefix)))
        if "database" in self._created:
            steps += [("dropping the replication slot", self._drop_slot),
                      ("dropping the database", self._drop_database)]
        if self.bootstrap:
            steps.append(("deleting the topics", self._delete_topics))
        stops = {"connect": connect.stop, "postgres": postgres.stop, "kafka": broker.stop}
        steps += [(f"stopping {name}", stops[name]) for name in reversed(self._started)]
        for what, step in steps:
            try:
                step()
            except Exception as e:  # noqa: BLE001 - the rest of the clean-up goes on; the demo reports it
                problems.append(f"clean-up: {what} failed: {type(e).__name__}: {e}")
        self._created.clear()
        self._started.clear()
        return problems

    # -- clean-up steps --------------------------------------------------------------------------------------
    def _admin_sql(self, statement: str, params: tuple[object, ...] = ()) -> list[tuple[object, ...]]:
        assert self.server is not None
        with workload.connect(self.server.dsn(), autocommit=True) as conn:
            cur = conn.execute(statement, params)
            return list(cur.fetchall()) if cur.description else []

    def _drop_slot(self) -> None:
        """The connector's slot, once its walsender has gone (a deleted connector's task may still hold it)."""
        slot = connect.slot_name_for(self.prefix)
        deadline = time.monotonic() + 30
        while True:
            found = self._admin_sql("SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,))
            if not found:
                return
            if not found[0][0] or time.monotonic() > deadline:
                self._admin_sql("SELECT pg_drop_replication_slot(%s)", (slot,))
                return
            time.sleep(0.2)

    def _drop_database(self) -> None:
        from psycopg import sql

        assert self.server is not None
        with workload.connect(self.server.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(self.database)))

    def _delete_topics(self) -> None:
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 0})
        topics = [t for t in admin.list_topics(timeout=10).topics if t.startswith(f"{self.prefix}.")]
        if topics:
            for future in admin.delete_topics(topics, operation_timeout=30).values():
                future.result()
