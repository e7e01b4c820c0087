"""Ingest jobs report into the tables they keep (tablestore.ingest_report) and `tablestore service`'s /metrics shows
it: `tablestore ingest` and `tablestore ingest-database` against the project's Kafka broker and real Spark."""
from __future__ import annotations

import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import logstore
import tablestore
from filestore.reports import JobReports
from logstore.kafka import KafkaAdmin
from tablestore.cdc.shop import ShopOrders
from tablestore.service import Intervals, Service, ServiceConfig
from tablestore.service.server import ServiceServer

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def _scrape(warehouse: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The service's /metrics over HTTP, by metric name and labels."""
    service = Service(ServiceConfig(str(warehouse), intervals=Intervals(3600, 3600, 3600)))
    server = ServiceServer(service, 0)
    try:
        service.run_once()   # finds the tables
        with urllib.request.urlopen(f"{server.url}/metrics", timeout=10) as response:
            text = response.read().decode()
    finally:
        server.close()
        service.stop()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text)
            for s in family.samples}


def _topic(bootstrap: str, name: str) -> str:
    KafkaAdmin({"bootstrap.servers": bootstrap}).create_topic(name, 1, None)
    return name


@pytest.mark.timeout(900)
def test_ingest_reports_its_events_and_freshness_and_metrics_show_them(
        spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    from tablestore.spark.ingest import IngestConfig, IngestJob

    topic = _topic(kafka_bootstrap, f"cdc-{uuid.uuid4().hex[:8]}")
    made_ms = time.time() * 1000
    records = list(ShopOrders(keys=50).events(300))   # 300 changes; a delete's tombstone is a record too
    logstore.produce_raw({"bootstrap.servers": kafka_bootstrap}, topic, records)
    warehouse = tmp_path / "wh"
    progress = IngestJob(spark, IngestConfig(
        table="shop.orders", topic=topic, bootstrap_servers=kafka_bootstrap, warehouse=str(warehouse), create=True,
        available_now=True, max_offsets_per_trigger=100,
        catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap})).run()
    table = tablestore.Catalog(str(warehouse)).get_table("shop.orders")
    reports = JobReports(table._store).reports()
    assert [r.job for r in reports] == ["ingest"]
    figures = reports[0].figures
    assert progress.events == len(records) == figures["events"]
    assert figures["events_per_second"] > 0   # three micro-batches: a rate between the last two reports
    # the newest event was made before the run and committed after it: its age at commit is at least the run's
    assert time.time() - made_ms / 1000 >= figures["event_to_commit_seconds"] > 0
    assert figures["last_commit_seconds"] > 0

    m = _scrape(warehouse)
    labels = (("job", "ingest"), ("table", "shop.orders"))
    assert m[("tablestore_ingest_events", labels)] == len(records)
    assert m[("tablestore_ingest_event_to_commit_seconds", labels)] == pytest.approx(figures["event_to_commit_seconds"])
    assert m[("tablestore_ingest_report_age_seconds", labels)] >= 0
    latest = table.snapshots()[-1]
    assert latest.commit_duration_ms is not None
    assert m[("tablestore_table_commit_latency_seconds", (("table", "shop.orders"),))] == \
        pytest.approx(latest.commit_duration_ms / 1000)


@pytest.mark.timeout(900)
def test_ingest_database_reports_into_every_table_it_keeps(spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob

    prefix = f"pg{uuid.uuid4().hex[:6]}"
    counts = {}
    for i, (name, n) in enumerate({"t0": 120, "t1": 60}.items()):
        topic = _topic(kafka_bootstrap, f"{prefix}.public.{name}")
        records = list(ShopOrders(keys=30, seed=i).events(n))
        logstore.produce_raw({"bootstrap.servers": kafka_bootstrap}, topic, records)
        counts[name] = len(records)
    warehouse = tmp_path / "wh"
    DatabaseIngestJob(spark, DatabaseIngestConfig(
        database="shop", topic_pattern=rf"{prefix}\.public\..*", bootstrap_servers=kafka_bootstrap,
        warehouse=str(warehouse), create=True, available_now=True, checkpoint=str(tmp_path / "ck"),
        catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap})).run()
    m = _scrape(warehouse)
    for name, n in counts.items():
        table = tablestore.Catalog(str(warehouse)).get_table(f"shop.{name}")
        [report] = JobReports(table._store).reports()
        assert report.job == "ingest-database" and report.figures["events"] == n
        assert report.figures["event_to_commit_seconds"] > 0
        assert m[("tablestore_ingest_events", (("job", "ingest-database"), ("table", f"shop.{name}")))] == n
