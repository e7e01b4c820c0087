"""What the service remembers of each table for its status page (tablestore.service.page): a bounded, in-memory
history per table, kept while the service runs (a restarted service starts empty; the table's own snapshots are the
lasting record).

Per table:
- `events`: the service's duty events that changed something, newest last (at most `EVENTS`): a compaction that
  committed (its snapshot and duration), a snapshot expiry that expired snapshots (which ids), an orphan removal
  and a partition expiry that ran. Duty errors are the runner's (`Service.errors`), not repeated here.
- `samples`: at the end of each turn of the table, the sorted runs of each of its buckets and its earliest and
  latest snapshot ids (at most `SAMPLES`, e.g. one hour at a 10 s turn).

`History.turn(catalog, name, state)` wraps one turn's duties (tablestore.service.runner): before them it notes the
table's earliest snapshot id and the duties' run counts, after them it records what changed and takes a sample
(one snapshot read and one manifest read). A sample that cannot be read is skipped (logged), never an error.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Iterator, Mapping

from filestore import sorted_run_counts

if TYPE_CHECKING:
    import catalog as _catalog

    from tablestore.service.duties import TableDuties

log = logging.getLogger(__name__)

EVENTS = 200
"""Duty events kept per table."""
SAMPLES = 360
"""Sorted-run samples kept per table (one per turn of the table)."""


@dataclass(frozen=True)
class DutyEvent:
    """A duty of the service that changed the table: when, which duty (duties.DUTIES), what it did, how long."""

    time_ms: int
    duty: str
    detail: str
    duration_s: float | None = None


@dataclass(frozen=True)
class RunsSample:
    """The table at the end of one turn: sorted runs per bucket (`partition/bucket` label -> runs), snapshot ids."""

    time_ms: int
    runs: Mapping[str, int]
    earliest_snapshot: int | None
    latest_snapshot: int | None


@dataclass
class TableHistory:
    events: deque[DutyEvent] = field(default_factory=lambda: deque(maxlen=EVENTS))
    samples: deque[RunsSample] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    compaction_snapshot: int | None = None


def bucket_label(partition: tuple[object, ...], bucket: int) -> str:
    """`bucket 0`, or with partition values `dt=2024-01-01/bucket 0`-like `2024-01-01/0`."""
    return "/".join([*(str(v) for v in partition), str(bucket)]) if partition else str(bucket)


class History:
    """Every table's history (thread-safe: the loop writes, the HTTP threads read)."""

    def __init__(self) -> None:
        self._tables: dict[str, TableHistory] = {}
        self._lock = threading.Lock()

    def events(self, name: str) -> list[DutyEvent]:
        with self._lock:
            h = self._tables.get(name)
            return list(h.events) if h else []

    def samples(self, name: str) -> list[RunsSample]:
        with self._lock:
            h = self._tables.get(name)
            return list(h.samples) if h else []

    def forget(self, keep: set[str]) -> None:
        """Drop the history of every table not in `keep` (dropped tables)."""
        with self._lock:
            for name in set(self._tables) - keep:
                del self._tables[name]

    def _of(self, name: str) -> TableHistory:
        with self._lock:
            return self._tables.setdefault(name, TableHistory())

    @contextlib.contextmanager
    def turn(self, catalog: "_catalog.Catalog", name: str, state: "TableDuties") -> Iterator[None]:
        """Around one turn's duties of table `name`: records what they changed and a sample after them."""
        runs_before = dict(state.runs)
        try:
            store = catalog.get_table(name).store
            earliest_before = store.snapshots.earliest_id()
        except Exception as e:  # noqa: BLE001 - the turn itself reports what is wrong with the table
            log.debug("history: table %s not readable: %s", name, e)
            yield
            return
        yield
        history = self._of(name)
        ran = [d for d, n in state.runs.items() if n > runs_before.get(d, 0)]
        try:
            latest = store.snapshots.latest()
            earliest = store.snapshots.earliest_id()
            runs = sorted_run_counts(store.live_files(latest))
        except Exception as e:  # noqa: BLE001 - e.g. dropped during the turn
            log.debug("history: table %s not readable after its turn: %s", name, e)
            return
        now_ms = int(time.time() * 1000)
        events = []
        compacted = state.last_compaction_snapshot
        if compacted is not None and compacted != history.compaction_snapshot:
            duty = "full-compaction" if "full-compaction" in ran else "compaction"
            events.append(DutyEvent(now_ms, duty, f"committed snapshot {compacted}", state.last_compaction_s))
            history.compaction_snapshot = compacted
        if "snapshot-expiry" in ran and earliest_before is not None and earliest is not None \
                and earliest > earliest_before:
            gone = f"{earliest_before}" if earliest == earliest_before + 1 else f"{earliest_before}..{earliest - 1}"
            events.append(DutyEvent(now_ms, "snapshot-expiry", f"expired snapshots {gone}"))
        for duty in ("orphan-removal", "partition-expiry"):
            if duty in ran:
                events.append(DutyEvent(now_ms, duty, "ran"))
        sample = RunsSample(now_ms, {bucket_label(p, b): n for (p, b), n in sorted(runs.items())}, earliest,
                            latest.id if latest else None)
        with self._lock:
            history.events.extend(events)
            history.samples.append(sample)
