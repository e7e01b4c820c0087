"""Job reports (filestore.reports): a job's latest figures kept in the table, replaced whole, never orphans."""
from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa

import tablestore
from filestore.reports import JobReports, job_id
from tablestore.ingest_report import IngestReporter

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def _table(tmp_path: Path) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"log.system": "none"})
    t.write(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    return t


def test_a_report_is_replaced_whole_and_read_back(tmp_path: Path) -> None:
    reports = JobReports(_table(tmp_path)._store)
    reports.write("ingest", {"events": 5, "lag_records": None}, now_ms=1000)
    reports.write("ingest", {"events": 9}, now_ms=2000)
    reports.write("other", {"events": 1}, now_ms=3000)
    got = reports.reports()
    assert [(r.job, r.update_time_ms, r.figures) for r in got] == [("ingest", 2000, {"events": 9.0}),
                                                                   ("other", 3000, {"events": 1.0})]
    assert sorted(p.name for p in (tmp_path / "db.db" / "t" / "report").iterdir()) == ["report-ingest",
                                                                                        "report-other"]
    reports.remove("other")
    assert [r.job for r in reports.reports()] == ["ingest"]


def test_a_damaged_report_is_skipped_and_job_ids_become_file_names(tmp_path: Path) -> None:
    t = _table(tmp_path)
    reports = JobReports(t._store)
    reports.write("a/b c", {"events": 1})
    (tmp_path / "db.db" / "t" / "report" / "report-broken").write_text("{not json")
    assert [r.job for r in reports.reports()] == ["a_b_c"]
    assert job_id(".hidden") == "job_.hidden" and job_id("x.tmp") == "job_x.tmp"


def test_the_reporter_gives_the_rate_between_reports(tmp_path: Path) -> None:
    t = _table(tmp_path)
    reporter = IngestReporter(t._store, "ingest")
    reporter.report(100, event_to_commit_s=1.5)
    first = JobReports(t._store).reports()[0].figures
    assert first == {"events": 100.0, "event_to_commit_seconds": 1.5}   # no rate from one report
    time.sleep(0.2)
    reporter.report(300, lag=7)
    second = JobReports(t._store).reports()[0].figures
    assert second["events"] == 300 and second["lag_records"] == 7 and "event_to_commit_seconds" not in second
    assert 0 < second["events_per_second"] <= 200 / 0.2


def test_orphan_removal_keeps_reports_and_commits_record_their_duration(tmp_path: Path) -> None:
    t = _table(tmp_path)
    JobReports(t._store).write("ingest", {"events": 1})
    stray = tmp_path / "db.db" / "t" / "bucket-0" / "data-stray.parquet"
    stray.write_bytes(b"x")
    removed = t.remove_orphan_files(older_than=int(time.time() * 1000) + 60_000)   # anything unreferenced goes
    assert [Path(p).name for p in removed] == ["data-stray.parquet"]
    assert [r.job for r in JobReports(t._store).reports()] == ["ingest"]
    info = t.snapshots()[-1]
    assert info.commit_duration_ms is not None and 0 <= info.commit_duration_ms < 60_000
