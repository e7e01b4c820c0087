"""The end offsets of the tables' Kafka topics, as /metrics shows them (tablestore.service.metrics).

One offsets request per scrape per table with a log (`log.system` = kafka; none for `log.system` = none), with a
short timeout (`TIMEOUT_S`): a Kafka cluster that does not answer costs a scrape that timeout once (the other
tables on the same bootstrap servers are skipped for the rest of the scrape), and their log metrics are left out of
that scrape (the failure is logged, never raised). The end offset of a bucket
is its topic partition's last stable offset (read_committed: what a consumer can read; for a topic without
transactions, its high watermark). The Kafka clients are kept per table (one connection, not one per scrape) and
rebuilt when the table's topic or Kafka properties change.
"""
from __future__ import annotations

import dataclasses
import logging
import threading

from logstore import LogStore

log = logging.getLogger(__name__)

TIMEOUT_S = 3.0
"""How long a scrape waits for one table's end offsets."""


class EndOffsets:
    """Reads the end offsets of the tables' topics, keeping one Kafka client per table."""

    def __init__(self, timeout_s: float = TIMEOUT_S) -> None:
        self._timeout_s = timeout_s
        self._stores: dict[str, LogStore] = {}
        self._lock = threading.Lock()
        self._down: set[str] = set()
        """Bootstrap servers that did not answer in this scrape."""

    def _client(self, name: str, log_store: LogStore) -> LogStore:
        options = dataclasses.replace(log_store.options, request_timeout_s=self._timeout_s)
        with self._lock:
            kept = self._stores.get(name)
            if kept is None or kept.options != options:
                kept = LogStore(options, log_store.schema, log_store.primary_key)
                self._stores[name] = kept
            return kept

    def read(self, name: str, log_store: LogStore | None) -> dict[int, int] | None:
        """Per bucket, the end offset of table `name`'s topic; None when it has no log or Kafka did not answer."""
        if log_store is None:
            return None
        client = self._client(name, log_store)
        bootstrap = client.options.bootstrap_servers
        if bootstrap in self._down:
            return None
        try:
            return client.admin.list_offsets(client.topic, client.options.partitions, timestamp_ms=None,
                                             read_committed=True)
        except Exception as e:  # noqa: BLE001 - LogStoreError, or a client that cannot be built: no log metrics now
            log.warning("metrics: table %s: could not read the end offsets of topic %s: %s", name, client.topic, e)
            with self._lock:
                self._down.add(bootstrap)
            return None

    def begin_scrape(self, keep: set[str]) -> None:
        """A new scrape: every cluster is asked again; the clients of tables not in `keep` (dropped) go."""
        with self._lock:
            self._down.clear()
            for name in set(self._stores) - keep:
                del self._stores[name]
