"""The service's /metrics (values as the table's own API reports them) and the real `tablestore service` process:
started in the background, asked, scraped over HTTP, stopped."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow as pa
from prometheus_client.parser import text_string_to_metric_families

import tablestore
from tablestore.service import Intervals, Service, ServiceConfig
from tablestore.service.server import ServiceServer

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])


def make(warehouse: Path, name: str, writes: int, **options: str) -> tablestore.Table:
    cat = tablestore.Catalog(str(warehouse))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table(name, SCHEMA, primary_key=["id"], options={"log.system": "none", "bucket": "2", **options})
    for i in range(writes):
        t.write(pa.table({"id": [i, i + 100, i + 200], "v": ["x", "y", "z"]}, schema=SCHEMA))
    return t


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for family in text_string_to_metric_families(text)
            for s in family.samples}


def test_metrics_match_the_tables(tmp_path: Path) -> None:
    t = make(tmp_path, "db.t", 4, **{"write-only": "true", "num-sorted-run.compaction-trigger": "3"})
    make(tmp_path, "db.empty", 0)
    service = Service(ServiceConfig(str(tmp_path), intervals=Intervals(0.05, 60, 3600)))
    server = ServiceServer(service, 0)
    try:
        service.run_once()   # compacts db.t (4 runs > trigger 3)
        m = scrape(server.url)
        table = (("table", "db.t"),)
        assert m[("tablestore_table_latest_snapshot_id", table)] == t.latest_snapshot_id()
        assert m[("tablestore_table_snapshots", table)] == len(t.snapshots())
        age = time.time() - t.snapshots()[-1].time_millis / 1000
        assert abs(m[("tablestore_table_latest_snapshot_age_seconds", table)] - age) < 5
        detail = t.describe()
        runs = [n for p in detail["partitions"] for n in p["sorted_runs"].values()]
        assert m[("tablestore_table_bucket_sorted_runs_max", table)] == max(runs)
        assert m[("tablestore_table_sorted_runs", table)] == sum(runs)
        assert m[("tablestore_table_data_files", table)] == detail["file_count"] == len(t.files())
        buckets: dict[int, int] = {}
        for f in t.files():
            buckets[f["bucket"]] = buckets.get(f["bucket"], 0) + 1   # type: ignore[index]
        assert m[("tablestore_table_bucket_data_files_max", table)] == max(buckets.values())
        assert m[("tablestore_service_lease_held", table)] == 1
        assert m[("tablestore_service_last_compaction_duration_seconds", table)] > 0
        assert m[("tablestore_service_duty_runs_total", (("duty", "compaction"), *table))] == 1
        assert m[("tablestore_service_duty_errors_total", (("duty", "compaction"), *table))] == 0
        assert m[("tablestore_table_latest_snapshot_id", (("table", "db.empty"),))] == 0
        assert m[("tablestore_service_errors_total", ())] == 0
    finally:
        server.close()
        service.stop()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "tablestore.cli", *args], capture_output=True, text=True,
                          timeout=120, env=env)


def test_the_service_process_starts_serves_metrics_and_stops(tmp_path: Path) -> None:
    warehouse = tmp_path / "wh"
    t = make(warehouse, "db.t", 6, **{"write-only": "true"})
    runs_before = max(n for p in t.describe()["partitions"] for n in p["sorted_runs"].values())
    env = {**os.environ, "TABLESTORE_SERVICE_DIR": str(tmp_path / "run")}
    port = _free_port()
    started = _cli("service", "--warehouse", str(warehouse), "--port", str(port), "--detach", "--interval", "0.2",
                   "--option", "snapshot.num-retained.min=1", "--option", "snapshot.num-retained.max=3",
                   "--expire-interval", "0.2", "--output", "json", env=env)
    assert started.returncode == 0, started.stderr
    info = json.loads(started.stdout)
    try:
        assert info["url"] == f"http://127.0.0.1:{port}" and info["warehouse"] == str(warehouse)
        status = _cli("service", "status", env=env)
        assert status.returncode == 0 and f"127.0.0.1:{port}" in status.stdout
        deadline = time.monotonic() + 60
        table = (("table", "db.t"),)
        while True:
            m = scrape(info["url"])
            done = (m.get(("tablestore_table_bucket_sorted_runs_max", table), runs_before) < runs_before
                    and m.get(("tablestore_table_snapshots", table)) == 3)
            if done or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert done, m   # compacted by the service, and expired down to the --option's maximum of 3 snapshots
        assert len(t.snapshots()) == 3 and m[("tablestore_service_lease_held", table)] == 1
        again = _cli("service", "--warehouse", str(warehouse), "--port", str(port), "--detach", env=env)
        assert again.returncode == 0 and f"(pid {info['pid']})" in again.stdout   # the running one
    finally:
        stopped = _cli("service", "stop", env=env)
    assert stopped.returncode == 0 and stopped.stdout.strip() == "stopped"
    down = _cli("service", "status", env=env)
    assert down.returncode == 3 and down.stdout.strip() == "down"
    assert _cli("service", "stop", env=env).stdout.strip() == "not running"
