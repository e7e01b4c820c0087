"""Job reports: what a long-running job writing the table (`tablestore ingest`, `tablestore ingest-database`) last
said of its progress, kept in the table so that whoever watches the table (`tablestore service`'s `/metrics`) can
read it without talking to the job.

    <table>/report/report-<job>   JSON (on-disk names): {"job": "<job>", "updateTime": epoch ms, "figures": {...}}

A report is replaced whole by an atomic overwrite (`FileIO.replace_hint`: a rename locally, one PUT on S3), so a
reader sees the old or the new report, never a torn one; one job id belongs to one job (the last writer wins). The
figures are numbers keyed by name; what they mean is the writer's contract (tablestore.ingest_report). Reports are
never data and never orphans (filestore.expire). A report is not removed when its job ends: its `updateTime` tells
how old it is, and `remove` (or dropping the table) deletes it.
"""
from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

from filestore.errors import CorruptFileError
from filestore.paths import report_job_of

if TYPE_CHECKING:
    from filestore.store import FileStore

_JOB = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")


@dataclass(frozen=True)
class JobReport:
    """One job's latest report."""

    job: str
    update_time_ms: int
    figures: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"job": self.job, "updateTime": self.update_time_ms, "figures": self.figures}, indent=2)

    @staticmethod
    def from_json(job: str, text: str, path: str, table: str) -> "JobReport":
        try:
            d = json.loads(text)
            figures = {str(k): float(v) for k, v in dict(d.get("figures") or {}).items() if v is not None}
            return JobReport(job, int(d["updateTime"]), figures)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise CorruptFileError(path, f"not a job report: {e}", table) from None


def job_id(name: str) -> str:
    """`name` made a report's job id: characters a file name may not hold become '_', at most 200 of them."""
    cleaned = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)[:200]
    if not cleaned or not _JOB.fullmatch(cleaned) or cleaned.endswith(".tmp"):
        cleaned = "job_" + cleaned[:190].rstrip(".")
    return cleaned


class JobReports:
    """Reads and writes the reports of one table."""

    def __init__(self, store: "FileStore") -> None:
        self._io = store.io
        self._paths = store.paths
        self.table = store.table_name

    def write(self, job: str, figures: Mapping[str, float | int | None], now_ms: int | None = None) -> JobReport:
        """Replace job `job`'s report (see `job_id` for what `job` may be)."""
        job = job_id(job)
        report = JobReport(job, int(time.time() * 1000) if now_ms is None else now_ms,
                           {k: float(v) for k, v in figures.items() if v is not None})
        self._io.replace_hint(self._paths.report_file(job), report.to_json().encode())
        return report

    def reports(self) -> list[JobReport]:
        """Every job's latest report, by job id; a report that cannot be parsed is skipped (it is being replaced,
        or not ours), so a watcher shows the others."""
        found = []
        for status in self._io.list_dir(self._paths.report_dir):
            job = report_job_of(status.path.rsplit("/", 1)[-1])
            if job is None or status.is_dir:
                continue
            try:
                found.append(JobReport.from_json(job, self._io.read_bytes(status.path).decode(), status.path,
                                                 self.table))
            except (FileNotFoundError, CorruptFileError, UnicodeDecodeError):
                continue
        return sorted(found, key=lambda r: r.job)

    def remove(self, job: str) -> None:
        self._io.delete(self._paths.report_file(job_id(job)))
