"""`tablestore service --master spark://...`: the compaction of big tables as Spark jobs on a cluster.

A `write-only` table whose live data files hold at least `min_bytes` is compacted by `CALL
managed.sys.compact(table => ..., full => ...)` in the service's own Spark session (application
`tablestore-service`, started at the first such compaction): on a cluster the buckets are rewritten by Spark tasks
on the executors and the driver commits one COMPACT snapshot (tablestore/spark/compact_job.py), so the service's
process never holds a big table's data. Smaller tables compact in the service's process, as without `--master`.
The table's own options (and the service's `--option` overrides) reach the job as the catalog reads them; the
overrides that govern compaction picking do not (the job opens the table as stored).
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

import catalog as _catalog

log = logging.getLogger(__name__)

APP_NAME = "tablestore-service"


class SparkCompactor:
    """Compacts tables through one Spark session on `master`, started lazily, stopped by `close()`."""

    def __init__(self, warehouse: str, master: str, *, min_bytes: int = 0,
                 catalog_options: Mapping[str, str] | None = None) -> None:
        self.warehouse = warehouse
        self.master = master
        self.min_bytes = min_bytes
        self._catalog_options = dict(catalog_options or {})
        self._spark: Any = None
        self._lock = threading.Lock()
        self.jobs = 0
        """Compactions run as Spark jobs so far."""

    def wants(self, live_bytes: int) -> bool:
        return live_bytes >= self.min_bytes

    def _session(self) -> Any:
        if self._spark is None:
            from tablestore.spark.sessions import CATALOG_CONF, session

            conf: dict[str, Any] = {f"{CATALOG_CONF}.{k}": v for k, v in self._catalog_options.items()}
            log.info("starting the service's Spark session on %s", self.master)
            self._spark = session(self.warehouse, master=self.master, app_name=APP_NAME, **conf)
        return self._spark

    def compact(self, name: str, *, full: bool) -> None:
        """One `CALL compact` of table `name` (universal picking unless `full`), on the cluster."""
        _catalog.parse_identifier(name)   # a checked identifier: nothing else reaches the SQL text
        with self._lock:
            spark = self._session()
            spark.sql(f"CALL managed.sys.compact(table => '{name}', full => {'true' if full else 'false'})").collect()
            self.jobs += 1

    def close(self) -> None:
        with self._lock:
            if self._spark is not None:
                self._spark.stop()
                self._spark = None
