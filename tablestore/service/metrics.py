"""The service's `/metrics`, in Prometheus' text format (prometheus-client), read from the tables at scrape time.

Per table (label `table` = `db.table`), for every table the service schedules, whoever holds its lease:
    tablestore_table_latest_snapshot_id             the latest snapshot's id
    tablestore_table_latest_snapshot_age_seconds    now minus the latest snapshot's commit time
    tablestore_table_snapshots                      snapshots kept (not expired)
    tablestore_table_data_files                     live data files, all buckets
    tablestore_table_bucket_data_files_max          live data files of the fullest bucket
    tablestore_table_sorted_runs                    sorted runs, summed over the buckets
    tablestore_table_bucket_sorted_runs_max         sorted runs of the bucket with the most
Per table this service holds the lease of:
    tablestore_service_lease_held                   1 (tables it does not hold: 0)
    tablestore_service_last_compaction_duration_seconds   the service's last compaction of the table
    tablestore_service_duty_runs_total{duty}        duties run
    tablestore_service_duty_errors_total{duty}      duties failed (the errors themselves: the service's log)
And `tablestore_service_errors_total`: every error the service recorded (also lease and discovery failures).
The names are a contract (dashboards use them): add, never rename.
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry

from filestore import sorted_run_counts
from tablestore.service.duties import DUTIES

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
)


def table_state(service: "Service", name: str) -> dict[str, float] | None:
    """The `tablestore_table_*` values of table `name` (None: it cannot be read now, e.g. just dropped)."""
    try:
        store = service.catalog.get_table(name).store
        snapshots = list(store.snapshots.snapshots())
    except Exception as e:  # noqa: BLE001 - a scrape shows the tables it can read
        log.debug("metrics: table %s not readable: %s", name, e)
        return None
    latest = snapshots[-1] if snapshots else None
    live = store.live_files(latest)
    files = [len(fs) for fs in live.files_by_bucket(None).values()]
    runs = list(sorted_run_counts(live).values())
    return {
        "latest_snapshot_id": latest.id if latest else 0,
        "latest_snapshot_age_seconds": max(0.0, time.time() - latest.time_millis / 1000) if latest else 0.0,
        "snapshots": len(snapshots),
        "data_files": sum(files),
        "bucket_data_files_max": max(files, default=0),
        "sorted_runs": sum(runs),
        "bucket_sorted_runs_max": max(runs, default=0),
    }


class ServiceCollector(Collector):
    """Reads the service's tables at each scrape."""

    def __init__(self, service: "Service") -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        service = self._service
        names, held = service.tables, service.held()
        gauges = {key: GaugeMetricFamily(f"tablestore_table_{key}", doc, labels=["table"]) for key, doc in
                  _TABLE_GAUGES}
        lease = GaugeMetricFamily("tablestore_service_lease_held", "1 if this service holds the table's lease.",
                                  labels=["table"])
        duration = GaugeMetricFamily("tablestore_service_last_compaction_duration_seconds",
                                     "Duration of the service's last compaction of the table.", labels=["table"])
        runs = CounterMetricFamily("tablestore_service_duty_runs", "Duties the service ran.", labels=["table", "duty"])
        errors = CounterMetricFamily("tablestore_service_duty_errors", "Duties that failed.",
                                     labels=["table", "duty"])
        for name in names:
            state = table_state(service, name)
            if state is not None:
                for key, value in state.items():
                    gauges[key].add_metric([name], value)
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
        yield from (lease, duration, runs, errors)
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
