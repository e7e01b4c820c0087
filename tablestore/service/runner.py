"""`Service`: the loop of `tablestore service`, keeping every table of a warehouse healthy.

Each turn (every `tick_s`):
1. list the warehouse's tables (those `tables` matches, as `db.table`): new ones join the schedule, dropped ones
   leave it (and their lease is forgotten, not released: the directory is gone);
2. per table: renew the lease this service holds once a third of its timeout has passed, or try to take it
   (filestore.lease: free, expired or released); a table whose lease another service holds is left alone;
3. per table held: run the duties that are due (tablestore.service.duties), one table after the other.
`stop()` ends the loop after the current duty and releases every lease held, so another service takes the tables
at once; a service killed without `stop()` keeps its leases until they expire (`lease_timeout_s`).
A failure of a duty, of a lease operation or of reading a table is logged and kept in `errors` (the newest
`duties.RECENT_ERRORS`), never the end of the loop.
"""
from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass, field
from typing import Mapping

import catalog as _catalog
from filestore import TablePaths, acquire_lease, release_lease, renew_lease
from tablestore.errors import TableStoreError
from tablestore.service.spark_compact import SparkCompactor
from tablestore.service.duties import DutyError, Intervals, RECENT_ERRORS, TableDuties, open_table, run_due
from tablestore.service.history import History

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServiceConfig:
    """What one service does: its warehouse, the table options it overrides for its duties, which tables
    (`tables`: a regular expression over `db.table`, matched whole), its lease timeout and duty intervals."""

    warehouse: str
    overrides: Mapping[str, str] = field(default_factory=dict)
    tables: str | None = None
    lease_timeout_s: float = 60.0
    intervals: Intervals = Intervals()
    catalog_options: Mapping[str, str] = field(default_factory=dict)
    master: str | None = None
    """A Spark master (`spark://host:7077`): tables of at least `spark_min_bytes` compact as Spark jobs there."""
    spark_min_bytes: int = 256 << 20

    @property
    def tick_s(self) -> float:
        return max(0.05, min(self.intervals.compaction_s, self.lease_timeout_s / 3))


class ServiceError(TableStoreError):
    """The service cannot start: a bad `--tables` pattern or `--option`."""


class Service:
    def __init__(self, config: ServiceConfig) -> None:
        try:
            self._pattern = re.compile(config.tables) if config.tables else None
        except re.error as e:
            raise ServiceError(f"--tables {config.tables!r} is not a regular expression: {e}") from None
        try:
            overrides = _catalog.validate_table_options(config.overrides)
        except _catalog.InvalidOptionError as e:
            raise ServiceError(f"--option: {e}") from None
        fixed = sorted(k for k in overrides if not any(o.matches(k) for o in _catalog.ALTERABLE))
        if fixed:   # the bucket count, file format, log...: how the data is laid out, never overridden
            raise ServiceError(f"--option {', '.join(fixed)}: fixed when a table is created, the service cannot "
                               f"override it; it can: {', '.join(sorted(o.key for o in _catalog.ALTERABLE))}")
        self.config = config
        self._overrides = overrides
        self.catalog = _catalog.Catalog(config.warehouse, dict(config.catalog_options))
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.started_at = time.time()
        self._held: dict[str, TableDuties] = {}
        self.history = History()
        """Per table, the duties' events and sorted-run samples of its turns (the status page's charts)."""
        self._known: list[str] = []
        self._errors: deque[DutyError] = deque(maxlen=RECENT_ERRORS)
        self._error_count = 0
        self._lock = threading.Lock()
        self._lease_lock = threading.Lock()   # one lease operation at a time: the loop's and the keeper's
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.spark: SparkCompactor | None = None
        if config.master:
            self.spark = SparkCompactor(config.warehouse, config.master, min_bytes=config.spark_min_bytes,
                                        catalog_options={**self.catalog.catalog_options})

    # -- what the metrics and the page read ----------------------------------------------------------------------
    @property
    def tables(self) -> list[str]:
        """The tables the service schedules (held or not), as of its last turn."""
        with self._lock:
            return list(self._known)

    def held(self) -> dict[str, TableDuties]:
        """The tables whose lease this service holds, with their duties' state."""
        with self._lock:
            return dict(self._held)

    @property
    def errors(self) -> list[DutyError]:
        """The most recent duty errors, oldest first."""
        with self._lock:
            return list(self._errors)

    @property
    def error_count(self) -> int:
        """Every error recorded since the service started."""
        with self._lock:
            return self._error_count

    def _record(self, error: DutyError) -> None:
        with self._lock:
            self._errors.append(error)
            self._error_count += 1

    # -- the loop ----------------------------------------------------------------------------------------------
    def run_once(self) -> None:
        """One turn: discover tables, take or renew their leases, run the duties due."""
        names = self._discover()
        with self._lock:
            self._known = names
            for gone in set(self._held) - set(names):
                log.info("table %s is gone: dropped from the schedule", gone)
                del self._held[gone]
        self.history.forget(set(names))
        for name in names:
            if self._stop.is_set():
                return
            state = self._lease(name)
            if state is None:
                continue
            try:
                table, write_only = open_table(self.catalog, name, self._overrides)
                with self.history.turn(self.catalog, name, state):
                    run_due(table, write_only, state, self.config.intervals, self._record, self.spark)
                table.close()
            except _catalog.TableNotFoundError:
                continue   # dropped since the listing: gone from the schedule at the next turn
            except Exception as e:  # noqa: BLE001 - e.g. an option that no longer parses: recorded, not fatal
                self._fail(name, "service", e)

    def _discover(self) -> list[str]:
        names = []
        try:
            for db in self.catalog.list_databases():
                for table in self.catalog.list_tables(db):
                    name = f"{db}.{table}"
                    if self._pattern is None or self._pattern.fullmatch(name):
                        names.append(name)
        except (_catalog.DatabaseNotFoundError, FileNotFoundError):
            pass   # a database dropped while listing: the next turn sees the rest
        except Exception as e:  # noqa: BLE001 - the warehouse unreachable for a moment
            self._fail("*", "discovery", e)
            return self.tables
        return names

    def _paths(self, name: str) -> TablePaths:
        db, table = _catalog.parse_identifier(name)
        return TablePaths(f"{self.catalog.database_path(db)}/{table}")

    def _lease(self, name: str) -> TableDuties | None:
        """This service's state of table `name` when it holds (or has just taken) its lease, else None."""
        try:
            with self._lease_lock:
                return self._take_or_renew(name)
        except Exception as e:  # noqa: BLE001 - the store unreachable: try again next turn
            self._fail(name, "lease", e)
            return None

    def _take_or_renew(self, name: str) -> TableDuties | None:
        timeout_ms = int(self.config.lease_timeout_s * 1000)
        io, paths = self.catalog.io, self._paths(name)
        with self._lock:
            state = self._held.get(name)
        if state is None:
            lease = acquire_lease(io, paths, self.owner, timeout_ms)
            if lease is None:
                return None
            state = TableDuties(name, lease)
        elif time.time() * 1000 >= state.lease.expires_ms - timeout_ms * 2 / 3:
            if not self.catalog.table_exists(name):
                return None   # dropped: renewing would write into its removed directory
            renewed = renew_lease(io, paths, state.lease, timeout_ms)
            if renewed is None:
                with self._lock:
                    self._held.pop(name, None)
                return None
            state.lease = renewed
        with self._lock:
            self._held[name] = state
        return state

    def _fail(self, name: str, what: str, e: BaseException) -> None:
        message = " ".join(str(e).split()) or type(e).__name__
        log.warning("table %s: %s failed: %s: %s", name, what, type(e).__name__, message)
        self._record(DutyError(int(time.time() * 1000), name, what, f"{type(e).__name__}: {message}"))

    def _keep_leases(self) -> None:
        """Renew the leases held while the loop is busy with a long duty (a turn may outlast a lease)."""
        while not self._stop.wait(self.config.lease_timeout_s / 6):
            for name in self.held():
                if not self._stop.is_set():
                    self._lease(name)

    def run(self) -> None:
        """Turn until `stop()`; then release the leases held."""
        keeper = threading.Thread(target=self._keep_leases, name="tablestore-service-leases", daemon=True)
        keeper.start()
        log.info("service %s on %s: %s tables, lease timeout %.0f s", self.owner, self.config.warehouse,
                 self.config.tables or "all", self.config.lease_timeout_s)
        try:
            while not self._stop.is_set():
                began = time.monotonic()
                try:
                    self.run_once()
                except Exception as e:  # noqa: BLE001 - never the end of the service
                    self._fail("*", "service", e)
                self._stop.wait(max(0.0, self.config.tick_s - (time.monotonic() - began)))
        finally:
            keeper.join()
            self._release_all()

    def start(self) -> "Service":
        """Run the loop in a thread of its own (tests, embedding); `stop()` ends it."""
        self._thread = threading.Thread(target=self.run, name="tablestore-service", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """End the loop (after its current duty) and release the leases held (a loop not started: at once)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        elif timeout_s > 0:   # driven by run_once, or never run; (0: a signal handler, the loop releases them)
            self._release_all()

    def _release_all(self) -> None:
        if self.spark is not None:
            self.spark.close()
        for name, state in self.held().items():
            try:
                release_lease(self.catalog.io, self._paths(name), state.lease)
            except Exception as e:  # noqa: BLE001 - it expires anyway
                log.warning("table %s: could not release the lease: %s", name, e)
        with self._lock:
            self._held.clear()
