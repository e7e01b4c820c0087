"""The service's `/metrics`, in Prometheus' text format (prometheus-client), read from the tables at scrape time.

Per table (label `table` = `db.table`), for every table the service schedules, whoever holds its lease:
    tablestore_table_latest_snapshot_id             the latest snapshot's id
    tablestore_table_latest_snapshot_age_seconds    now minus the latest snapshot's commit time
    tablestore_table_snapshots                      snapshots kept (not expired)
    tablestore_table_data_files                     live data files, all buckets
    tablestore_table_bucket_data_files_max          live data files of the fullest bucket
    tablestore_table_sorted_runs                    sorted runs, summed over the buckets
    tablestore_table_bucket_sorted_runs_max         sorted runs of the bucket with the most
    tablestore_table_compaction_debt_bytes          bytes a full compaction of every bucket with more than one
                                                    sorted run would rewrite: the size of those buckets' files
    tablestore_table_commit_interval_seconds        seconds between the commit times of the latest two snapshots
                                                    (absent below two)
    tablestore_table_commit_latency_seconds         the latest snapshot's commit: from its writer's call to the
                                                    snapshot (`commitDurationMillis`, filestore.meta.Snapshot;
                                                    absent for a snapshot written before it was recorded)
    tablestore_table_log_end_offset{bucket}         tables with a Kafka log: the end offset of each bucket's topic
                                                    partition (tablestore.service.log_offsets; absent when Kafka did
                                                    not answer within its timeout)
Per consumer of a table (label `consumer`; filestore.consumers):
    tablestore_consumer_lag_snapshots               snapshots whose changes it has not read all of: the latest
                                                    snapshot's id + 1 - its next snapshot
    tablestore_consumer_lag_records                 tables with a Kafka log: records it has not read, the sum over
                                                    the buckets of end offset - its offset (absent without end
                                                    offsets); counted in offsets as Kafka counts a consumer's lag, so
                                                    a transactional commit's marker (one per bucket) counts too
Per table this service holds the lease of:
    tablestore_service_lease_held                   1 (tables it does not hold: 0)
    tablestore_service_last_compaction_duration_seconds   the service's last compaction of the table
    tablestore_service_duty_runs_total{duty}        duties run
    tablestore_service_duty_errors_total{duty}      duties failed (the errors themselves: the service's log)
Per ingest job writing a table (label `job`: `ingest` or `ingest-database`), from the report it keeps in the table
(tablestore.ingest_report, filestore.reports; a job reports after each committed micro-batch):
    tablestore_ingest_events                        events it has written into the table since it started
    tablestore_ingest_events_per_second             events written per second between its two latest reports
    tablestore_ingest_event_to_commit_seconds       its latest micro-batch's commit time minus its newest event's
                                                    source time: the end-to-end latency of the freshest change
    tablestore_ingest_last_commit_seconds           `ingest`: its latest micro-batch's time from start to commit
    tablestore_ingest_lag_records                   `ingest`: source-topic records not read yet
    tablestore_ingest_report_age_seconds            now minus the report's time (a stopped job's report stays,
                                                    growing old)
And `tablestore_service_errors_total`: every error the service recorded (also lease and discovery failures).
The names are a contract (dashboards use them): add, never rename.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from filestore import ConsumerManager, JobReport, JobReports, sorted_runs
from tablestore.ingest_report import FIGURES
from tablestore.service.duties import DUTIES
from tablestore.service.log_offsets import EndOffsets

if TYPE_CHECKING:
    from tablestore.service.runner import Service

log = logging.getLogger(__name__)

_TABLE_GAUGES = (
    ("latest_snapshot_id", "The latest snapshot's id."),
    ("latest_snapshot_age_seconds", "Seconds since the latest snapshot was committed."),
    ("snapshots", "Snapshots kept (not expired)."),
    ("data_files", "Live data files of the table."),
    ("bucket_data_files_max", "Live data files of the table's fullest bucket."),
    ("sorted_runs", "Sorted runs of the table, summed over its buckets."),
    ("bucket_sorted_runs_max", "Sorted runs of the table's bucket with the most."),
    ("compaction_debt_bytes", "Bytes a full compaction of every bucket with more than one sorted run would rewrite."),
    ("commit_interval_seconds", "Seconds between the commit times of the table's latest two snapshots."),
    ("commit_latency_seconds", "The table's latest commit: seconds from its writer's call to the snapshot."),
)


@dataclass(frozen=True)
class TableReading:
    """What one scrape reads of one table."""

    gauges: dict[str, float]
    """The `tablestore_table_*` values by name (see `_TABLE_GAUGES`)."""
    end_offsets: dict[int, int] | None
    """Per bucket, the end offset of its topic partition; None: no log, or Kafka did not answer."""
    consumer_lag: list[tuple[str, int, int | None]]
    """Per consumer: its id, its lag in snapshots and in records (None without end offsets)."""
    reports: list[JobReport]
    """The latest report of each job writing the table (filestore.reports)."""


def table_state(service: "Service", name: str) -> dict[str, float] | None:
    """The `tablestore_table_*` values of table `name` (None: it cannot be read now, e.g. just dropped)."""
    reading = read_table(service, name, None)
    return None if reading is None else reading.gauges


def read_table(service: "Service", name: str, offsets: EndOffsets | None) -> TableReading | None:
    """Everything /metrics shows of table `name` (None: it cannot be read now); `offsets`: how its log's end
    offsets are read (None: they are not)."""
    try:
        handle = service.catalog.get_table(name)
        store = handle.store
        snapshots = list(store.snapshots.snapshots())
        latest = snapshots[-1] if snapshots else None
        by_bucket = store.live_files(latest).files_by_bucket(None)
        consumers = ConsumerManager(store).consumers()
        reports = JobReports(store).reports()
    except Exception as e:  # noqa: BLE001 - a scrape shows the tables it can read
        log.debug("metrics: table %s not readable: %s", name, e)
        return None
    files = [len(fs) for fs in by_bucket.values()]
    runs = [len(sorted_runs(fs)) for fs in by_bucket.values()]
    gauges = {
        "latest_snapshot_id": latest.id if latest else 0,
        "latest_snapshot_age_seconds": max(0.0, time.time() - latest.time_millis / 1000) if latest else 0.0,
        "snapshots": len(snapshots),
        "data_files": sum(files),
        "bucket_data_files_max": max(files, default=0),
        "sorted_runs": sum(runs),
        "bucket_sorted_runs_max": max(runs, default=0),
        "compaction_debt_bytes": sum(f.file_size for fs, n in zip(by_bucket.values(), runs) if n > 1 for f in fs),
    }
    if len(snapshots) >= 2:
        gauges["commit_interval_seconds"] = max(0, snapshots[-1].time_millis - snapshots[-2].time_millis) / 1000
    if latest is not None and latest.commit_duration_ms is not None:
        gauges["commit_latency_seconds"] = latest.commit_duration_ms / 1000
    end = offsets.read(name, handle.log) if offsets is not None else None
    next_id = (latest.id if latest else 0) + 1
    lag = [(c.consumer_id, max(0, next_id - c.next_snapshot_id),
            None if end is None else sum(max(0, o - c.log_offsets.get(b, 0)) for b, o in end.items()))
           for c in consumers]
    return TableReading(gauges, end, lag, reports)


class ServiceCollector(Collector):
    """Reads the service's tables at each scrape."""

    def __init__(self, service: "Service") -> None:
        self._service = service
        self._offsets = EndOffsets()

    def collect(self) -> Iterator[Metric]:
        service = self._service
        names, held = service.tables, service.held()
        gauges = {key: GaugeMetricFamily(f"tablestore_table_{key}", doc, labels=["table"]) for key, doc in
                  _TABLE_GAUGES}
        end_offset = GaugeMetricFamily("tablestore_table_log_end_offset", "End offset of each bucket's topic "
                                       "partition (tables with a Kafka log).", labels=["table", "bucket"])
        lag_snapshots = GaugeMetricFamily("tablestore_consumer_lag_snapshots", "Snapshots whose changes the consumer "
                                          "has not read all of.", labels=["table", "consumer"])
        lag_records = GaugeMetricFamily("tablestore_consumer_lag_records", "Records of the table's log the consumer "
                                        "has not read, over all buckets.", labels=["table", "consumer"])
        lease = GaugeMetricFamily("tablestore_service_lease_held", "1 if this service holds the table's lease.",
                                  labels=["table"])
        duration = GaugeMetricFamily("tablestore_service_last_compaction_duration_seconds",
                                     "Duration of the service's last compaction of the table.", labels=["table"])
        runs = CounterMetricFamily("tablestore_service_duty_runs", "Duties the service ran.", labels=["table", "duty"])
        errors = CounterMetricFamily("tablestore_service_duty_errors", "Duties that failed.",
                                     labels=["table", "duty"])
        ingest = {key: GaugeMetricFamily(f"tablestore_ingest_{key}", doc, labels=["table", "job"])
                  for key, doc in (*FIGURES, ("report_age_seconds", "Seconds since the ingest job's latest report."))}
        self._offsets.begin_scrape(set(names))
        for name in names:
            reading = read_table(service, name, self._offsets)
            if reading is not None:
                for key, value in reading.gauges.items():
                    gauges[key].add_metric([name], value)
                for bucket, offset in sorted((reading.end_offsets or {}).items()):
                    end_offset.add_metric([name, str(bucket)], offset)
                for consumer, snapshots, records in reading.consumer_lag:
                    lag_snapshots.add_metric([name, consumer], snapshots)
                    if records is not None:
                        lag_records.add_metric([name, consumer], records)
                for report in reading.reports:
                    for key, value in report.figures.items():
                        if key in ingest:
                            ingest[key].add_metric([name, report.job], value)
                    ingest["report_age_seconds"].add_metric([name, report.job],
                                                            max(0.0, time.time() - report.update_time_ms / 1000))
            duties = held.get(name)
            lease.add_metric([name], 1 if duties is not None else 0)
            if duties is None:
                continue
            if duties.last_compaction_s is not None:
                duration.add_metric([name], duties.last_compaction_s)
            for duty in DUTIES:
                runs.add_metric([name, duty], duties.runs[duty])
                errors.add_metric([name, duty], duties.errors[duty])
        yield from gauges.values()
        yield from ingest.values()
        yield from (end_offset, lag_snapshots, lag_records, lease, duration, runs, errors)
        total = CounterMetricFamily("tablestore_service_errors", "Errors the service recorded (duties, leases, "
                                    "discovery), since it started.")
        total.add_metric([], service.error_count)
        yield total
        up = GaugeMetricFamily("tablestore_service_start_time_seconds", "When the service started (epoch s).")
        up.add_metric([], service.started_at)
        yield up


def registry_for(service: "Service") -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ServiceCollector(service))
    return registry
