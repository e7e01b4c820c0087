"""The service's /metrics beyond the basics (test_service_process.py): compaction debt, the interval between
commits, consumers' lag in snapshots, and on a table with a Kafka log its end offsets and consumers' lag in records,
each as the table's own API reports it."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest

import tablestore
from log_helpers import drop_created_tables, kafka_catalog
from tablestore.service import Intervals, Service, ServiceConfig
from tablestore.service.server import ServiceServer
from test_service_process import scrape

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
NO_COMPACTION = {"num-sorted-run.compaction-trigger": "20", "num-sorted-run.stop-trigger": "30"}


def make(tmp_path: Path, name: str, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(tmp_path))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(name, SCHEMA, primary_key=["id"],
                            options={"log.system": "none", "bucket": "2", **NO_COMPACTION, **options})


def write(t: tablestore.Table, *ids: int) -> None:
    t.write(pa.table({"id": list(ids), "v": [f"v{i}" for i in ids]}, schema=SCHEMA))


def scraped(warehouse: Path) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    service = Service(ServiceConfig(str(warehouse), intervals=Intervals(0.05, 3600, 3600)))
    server = ServiceServer(service, 0)
    try:
        service.run_once()
        return scrape(server.url)
    finally:
        server.close()
        service.stop()


def test_compaction_debt_is_the_bytes_of_buckets_above_one_sorted_run(tmp_path: Path) -> None:
    t = make(tmp_path, "db.wo", **{"write-only": "true"})   # the service's universal compaction: not before 20 runs
    write(t, *range(40))                                      # both buckets
    for _ in range(3):
        write(t, 7)                                           # one bucket only: it has 4 runs, the other 1
    flat = make(tmp_path, "db.flat")
    write(flat, *range(40))
    m = scraped(tmp_path)
    partitions: list[dict[str, dict[str, int]]] = t.describe()["partitions"]   # type: ignore[assignment]
    runs = {int(b): n for p in partitions for b, n in p["sorted_runs"].items()}
    assert sorted(runs.values()) == [1, 4]
    debt = sum(int(f["file_size"]) for f in t.files() if runs[f["bucket"]] > 1)   # type: ignore[call-overload,index]
    assert debt > 0 and m[("tablestore_table_compaction_debt_bytes", (("table", "db.wo"),))] == debt
    assert m[("tablestore_table_compaction_debt_bytes", (("table", "db.flat"),))] == 0
    assert m[("tablestore_table_bucket_sorted_runs_max", (("table", "db.wo"),))] == 4


def test_commit_interval_and_consumer_lag_in_snapshots(tmp_path: Path) -> None:
    t = make(tmp_path, "db.t")
    for i in range(4):
        write(t, i)
    t.reset_consumer("behind", 2)   # has read the changes of snapshot 1 only
    t.reset_consumer("done", 5)     # has read every commit
    single = make(tmp_path, "db.single")
    write(single, 1)
    m = scraped(tmp_path)
    table = (("table", "db.t"),)
    snapshots = t.snapshots()
    interval = (snapshots[-1].time_millis - snapshots[-2].time_millis) / 1000
    assert m[("tablestore_table_commit_interval_seconds", table)] == pytest.approx(interval)
    assert ("tablestore_table_commit_interval_seconds", (("table", "db.single"),)) not in m   # one snapshot only
    assert {c.consumer_id: c.next_snapshot_id for c in t.consumers()} == {"behind": 2, "done": 5}
    assert m[("tablestore_consumer_lag_snapshots", (("consumer", "behind"), *table))] == 3   # snapshots 2, 3, 4
    assert m[("tablestore_consumer_lag_snapshots", (("consumer", "done"), *table))] == 0
    assert not [k for k in m if k[0] in ("tablestore_consumer_lag_records", "tablestore_table_log_end_offset")]


@pytest.fixture
def _drop_tables() -> Iterator[None]:
    yield
    drop_created_tables()


@pytest.mark.kafka
@pytest.mark.usefixtures("_drop_tables")
def test_log_end_offsets_and_consumer_lag_in_records(tmp_path: Path, kafka_bootstrap: str) -> None:
    t = kafka_catalog(tmp_path, kafka_bootstrap).create_table("db.k", SCHEMA, primary_key=["id"],
                                                              options={"bucket": "2"})
    write(t, *range(10))
    assert sum(b.num_rows for b in t.read_changes(timeout_s=0.5, consumer_id="c")) == 10
    m = scraped(tmp_path / "wh")
    table = (("table", "db.k"),)
    end = {int(dict(k[1])["bucket"]): v for k, v in m.items()
           if k[0] == "tablestore_table_log_end_offset" and ("table", "db.k") in k[1]}
    latest = t.snapshots()[-1]
    assert set(end) == {0, 1} and all(end[b] >= latest.log_offsets.get(b, 0) for b in end)
    [c] = t.consumers()
    assert m[("tablestore_consumer_lag_records", (("consumer", "c"), *table))] == \
        sum(end[b] - c.log_offsets.get(b, 0) for b in end) == 0   # it has read everything
    assert m[("tablestore_consumer_lag_snapshots", (("consumer", "c"), *table))] == 0

    write(t, *range(100, 107))   # 7 records it has not read
    m = scraped(tmp_path / "wh")
    after = {int(dict(k[1])["bucket"]): v for k, v in m.items()
             if k[0] == "tablestore_table_log_end_offset" and ("table", "db.k") in k[1]}
    lag = m[("tablestore_consumer_lag_records", (("consumer", "c"), *table))]
    # counted in offsets, as Kafka counts a consumer's lag: the 7 records and the commit marker of the write's
    # transaction in each partition it wrote to
    assert lag == sum(after[b] - end[b] for b in end) and 7 < lag <= 7 + 2
    assert m[("tablestore_consumer_lag_snapshots", (("consumer", "c"), *table))] == 1
    assert ("tablestore_table_log_end_offset", (("bucket", "0"), *table)) in m
