"""What an ingest job reports into each table it keeps (a job report, filestore.reports), so that
`tablestore service`'s `/metrics` can show its throughput and freshness without talking to the job.

Jobs: `ingest` (`tablestore ingest`) and `ingest-database` (`tablestore ingest-database`, a report in every table it
keeps); a restarted job replaces its report. Figures (the names are a contract: `/metrics` names follow them):
    events                    events the job has written into the table since it started
    events_per_second         events written into the table per second of wall time between the job's two latest
                              reports (a report follows each committed micro-batch with events)
    event_to_commit_seconds   the latest micro-batch's commit time minus its newest event's source time (Debezium's
                              `ts_ms`): how old the newest change was when it became readable
    last_commit_seconds       the latest micro-batch's time from its start to its commit (`tablestore ingest` only)
    lag_records               records of the source topic not read yet (`tablestore ingest` only; Spark's figure)
A report that cannot be written is logged and skipped: it never fails the job.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from filestore import JobReports

if TYPE_CHECKING:
    from filestore import FileStore

log = logging.getLogger(__name__)

INGEST_JOB = "ingest"
DATABASE_JOB = "ingest-database"
FIGURES = (
    ("events", "Events the ingest job has written into the table since it started."),
    ("events_per_second", "Events the ingest job wrote into the table per second, between its two latest reports."),
    ("event_to_commit_seconds", "The ingest job's latest micro-batch: its commit time minus its newest event's "
     "source time."),
    ("last_commit_seconds", "The ingest job's latest micro-batch: its time from start to commit."),
    ("lag_records", "Records of the source topic the ingest job has not read yet."),
)


class IngestReporter:
    """Writes one job's reports into one table, with the rate between consecutive reports."""

    def __init__(self, store: "FileStore", job: str) -> None:
        self._reports = JobReports(store)
        self._job = job
        self._last: tuple[float, int] | None = None

    def report(self, events: int, *, event_to_commit_s: float | None = None, last_commit_s: float | None = None,
               lag: int | None = None) -> None:
        """The job has written `events` events into the table so far (a running total)."""
        now = time.time()
        rate = None
        if self._last is not None and now > self._last[0]:
            rate = max(0, events - self._last[1]) / (now - self._last[0])
        self._last = (now, events)
        figures = {"events": events, "events_per_second": rate, "event_to_commit_seconds": event_to_commit_s,
                   "last_commit_seconds": last_commit_s, "lag_records": lag}
        try:
            self._reports.write(self._job, figures, int(now * 1000))
        except Exception as e:  # noqa: BLE001 - a report is best effort: the job goes on
            log.warning("table %s: could not write the %s job's report: %s", self._reports.table, self._job, e)
