"""Jobs on a Spark standalone cluster (tests/spark_cluster.py: a master and two one-core workers, executors in JVMs
of their own with Python workers of their own) against an S3 warehouse (SeaweedFS): the S3 job (SQL DDL and DML,
df.write / spark.read, a streaming write, compaction), `tablestore ingest`, and an executor killed (kill -9) in the
middle of a write, after which Spark's task retries leave the table holding every row once."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable

import pytest

import logstore
import tablestore
from logstore.kafka import KafkaAdmin
from s3_server import S3Server
from spark_cluster import SparkCluster
from tablestore.cdc.shop import ShopOrders
from test_spark_s3 import check_job, run_job

pytestmark = [pytest.mark.cluster, pytest.mark.s3, pytest.mark.spark, pytest.mark.version_independent]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _job_with_a_kill(cmd: list[str], tmp_path: Path, ready: Callable[[], bool], kill: Callable[[], None],
                     waiting_for: str) -> dict[str, Any]:
    """Run a job script (its RESULT line is JSON) with the cluster; once `ready()`, `kill()` (kill -9 of an
    executor); the job must still end well. Its result."""
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TABLESTORE_CATALOG_OPTIONS"))}
    with open(out, "wb") as o, open(err, "wb") as e:
        proc = subprocess.Popen(cmd, stdout=o, stderr=e, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while not ready():
            assert proc.poll() is None, err.read_text()[-4000:]
            assert time.monotonic() < deadline, f"no {waiting_for}"
            time.sleep(0.2)
        kill()
        code = proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 0, err.read_text()[-6000:]
    result: dict[str, Any] = json.loads(
        next(l for l in out.read_text().splitlines() if l.startswith("RESULT "))[len("RESULT "):])
    return result


@pytest.mark.timeout(900)
def test_the_s3_job_runs_on_a_standalone_cluster(
    spark_cluster: SparkCluster, s3_warehouse: str, s3_server: S3Server, tmp_path: Path
) -> None:
    seen = run_job(s3_warehouse, spark_cluster.master_url, s3_server.catalog_options(), tmp_path)
    check_job(seen)
    assert seen["executors"] == 2   # the work ran in the workers' executors, not in the driver
    assert seen["compact_jobs"] == 1   # the compaction too: a Spark job whose tasks rewrote the buckets


@pytest.mark.timeout(900)
def test_an_executor_killed_in_the_middle_of_a_write_leaves_every_row_once(
    spark_cluster: SparkCluster, s3_warehouse: str, s3_server: S3Server, tmp_path: Path
) -> None:
    from cluster_write_job import ROWS

    def kill() -> None:
        time.sleep(1.0)
        victims = spark_cluster.executor_pids()
        assert len(victims) == 2
        os.kill(victims[0], signal.SIGKILL)

    cmd = [sys.executable, str(HERE / "cluster_write_job.py"), s3_warehouse, spark_cluster.master_url,
           json.dumps(s3_server.catalog_options()), str(tmp_path)]
    seen = _job_with_a_kill(cmd, tmp_path, lambda: bool(list(tmp_path.glob("started-*"))), kill,
                            "task started")   # a task is running: its executor goes
    assert list(tmp_path.glob("started-*-1")), "no task was retried: the kill missed the running tasks"
    assert seen == {"rows": ROWS, "snapshots": ["APPEND"]}
    table = tablestore.Catalog(s3_warehouse, options=s3_server.catalog_options()).get_table("db.t")
    ids = table.read(columns=["id"]).column("id").to_pylist()
    assert sorted(ids) == list(range(ROWS))   # every row once: the lost executor's files were never committed


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_tablestore_ingest_runs_on_a_standalone_cluster(
    spark_cluster: SparkCluster, s3_warehouse: str, s3_server: S3Server, kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic = f"cdc-{uuid.uuid4().hex[:8]}"
    KafkaAdmin({"bootstrap.servers": kafka_bootstrap}).create_topic(topic, 2, None)
    shop = ShopOrders(keys=100, key_change_ratio=0.02)
    logstore.produce_raw({"bootstrap.servers": kafka_bootstrap}, topic, shop.events(500))
    flags = [f"--option={k}={v}" for k, v in s3_server.catalog_options().items()]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TABLESTORE_CATALOG_OPTIONS"))}
    out, err = tmp_path / "ingest.out", tmp_path / "ingest.err"
    cmd = [sys.executable, "-m", "tablestore.cli", "ingest", "shop.orders", "--topic", topic,
           "--bootstrap-servers", kafka_bootstrap, "--warehouse", s3_warehouse, *flags, "--create",
           "--available-now", "--master", spark_cluster.master_url,   # the default checkpoint: under the table, in S3
           "--conf", "spark.sql.shuffle.partitions=2", "--conf", "spark.executor.memory=1g",
           "--conf", "spark.tablestore.s3a.ship=false"]   # one machine: the S3A jars are where the driver has them
    with open(out, "wb") as o, open(err, "wb") as e:
        code = subprocess.call(cmd, stdout=o, stderr=e, env=env, timeout=600)
    assert code == 0, err.read_text()[-6000:]
    table = tablestore.Catalog(s3_warehouse, options=s3_server.catalog_options()).get_table("shop.orders")
    rows = sorted(table.read().to_pylist(), key=lambda r: r["order_id"])
    assert rows == shop.expected_rows()


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _committed_records(bootstrap: str, topic: str, partitions: int) -> list[Any]:
    """Every committed record of `topic` (read_committed, a plain consumer): aborted ones are not there."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"cluster-test-{uuid.uuid4()}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        out: list[Any] = []
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 3:
            got = [m for m in consumer.consume(num_messages=5000, timeout=0.3) if m.error() is None]
            if got:
                quiet_since = time.monotonic()
            out += [m.value() for m in got]
        return out
    finally:
        consumer.close()


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_an_executor_killed_while_producing_the_log_leaves_every_change_once(
    spark_cluster: SparkCluster, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The log of a write is produced by the executors, one task per bucket (tablestore/log_publish.py). The first
    such task stops before its Kafka transaction commits and its executor is killed (kill -9): Spark retries the
    task elsewhere, whose producer (same transactional id) fences the dead one's transaction; the log holds each
    change once and the snapshot records it."""
    from cluster_log_job import BUCKETS, ROWS

    marker = tmp_path / "fault"

    def kill() -> None:
        worker = int(marker.read_text().split()[1])   # the Python worker holding the open transaction
        executors = set(spark_cluster.executor_pids())
        ancestor = worker
        while ancestor > 1 and ancestor not in executors:
            ancestor = _parent(ancestor)
        assert ancestor in executors, "the log task did not run in an executor"
        os.kill(ancestor, signal.SIGKILL)   # kill -9 of the task's executor
        os.kill(worker, signal.SIGKILL)     # and its Python worker, which would sleep on

    cmd = [sys.executable, str(HERE / "cluster_log_job.py"), str(tmp_path / "wh"), spark_cluster.master_url,
           kafka_bootstrap, f"log-bucket-producing@1:{marker}"]
    seen = _job_with_a_kill(cmd, tmp_path, lambda: marker.exists() and bool(marker.read_text().strip()), kill,
                            "log task reached its fault point")
    assert seen["rows"] == ROWS and seen["pending"] == []
    assert seen["snapshots"][:2] == ["APPEND", "COMPACT"]   # the data, then the log-only snapshot of its offsets
    records = _committed_records(kafka_bootstrap, str(seen["topic"]), BUCKETS)
    ids = sorted(json.loads(r)["after"]["id"] for r in records)
    assert ids == list(range(ROWS))   # each change once: the killed attempt's transaction was aborted


@pytest.mark.kafka
@pytest.mark.timeout(900)
def test_a_buckets_log_tasks_stay_on_one_executor(spark_cluster: SparkCluster, kafka_bootstrap: str,
                                                   tmp_path: Path) -> None:
    """The log job asks for each bucket's task to run on the executor that bucket maps to, so a bucket's producer
    (its transactional id) stays open in one executor's Python worker from commit to commit instead of being
    started (and fencing the other's) wherever Spark offers the task: every log task of a bucket runs in one
    process, and the buckets are spread over both executors."""
    from cluster_log_job import BUCKETS, ROWS

    commits, profiles = 4, tmp_path / "profiles"
    out, err = tmp_path / "job.out", tmp_path / "job.err"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TABLESTORE_CATALOG_OPTIONS"))}
    with open(out, "wb") as o, open(err, "wb") as e:
        code = subprocess.call([sys.executable, str(HERE / "cluster_log_job.py"), str(tmp_path / "wh"),
                                spark_cluster.master_url, kafka_bootstrap, "", str(commits), str(profiles)],
                               stdout=o, stderr=e, env=env, timeout=600)
    assert code == 0, err.read_text()[-6000:]
    seen = json.loads(next(l for l in out.read_text().splitlines() if l.startswith("RESULT "))[len("RESULT "):])
    assert seen["rows"] == ROWS and seen["pending"] == []
    processes: dict[int, set[int]] = {}
    tasks = 0
    for profile in profiles.glob("log-task-b*.prof"):   # log-task-b<bucket>-<pid>-<ns>.prof
        bucket, pid, _ = profile.stem[len("log-task-b"):].split("-")
        processes.setdefault(int(bucket), set()).add(int(pid))
        tasks += 1
    assert tasks == BUCKETS * commits and sorted(processes) == list(range(BUCKETS))
    assert all(len(pids) == 1 for pids in processes.values()), processes
    assert len(set().union(*processes.values())) == 2, processes   # both executors produce


@pytest.mark.timeout(900)
def test_the_service_compacts_a_big_table_as_a_spark_job_on_the_cluster(spark_cluster: SparkCluster,
                                                                        tmp_path: Path) -> None:
    """`tablestore service --master`: a write-only table compacts as a Spark job of the service's application on
    the cluster (CALL compact on the executors), not in the service's process."""
    import socket
    import urllib.request

    import pyarrow as pa

    warehouse = tmp_path / "wh"
    cat = tablestore.Catalog(str(warehouse))
    cat.create_database("db")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    t = cat.create_table("db.t", schema, primary_key=["id"], options={"log.system": "none", "bucket": "2",
                                                                        "write-only": "true"})
    for i in range(6):
        t.write(pa.table({"id": [i, i + 100], "v": ["x", "y"]}, schema=schema))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "TABLESTORE_CATALOG_OPTIONS"))}
    env["TABLESTORE_SERVICE_DIR"] = str(tmp_path / "run")
    cli = [sys.executable, "-m", "tablestore.cli", "service"]
    started = subprocess.run([*cli, "--warehouse", str(warehouse), "--port", str(port), "--detach", "--master",
                              spark_cluster.master_url, "--spark-min-mb", "0", "--interval", "1"],
                             capture_output=True, text=True, env=env, timeout=300)
    assert started.returncode == 0, started.stderr
    try:
        deadline = time.monotonic() + 400
        while t.snapshots()[-1].kind != "COMPACT":
            assert time.monotonic() < deadline, (tmp_path / "run" / "service.log").read_text()[-4000:]
            time.sleep(1)
        with urllib.request.urlopen(f"{spark_cluster.web_url}/json/", timeout=10) as reply:
            apps = json.load(reply)
        names = [a["name"] for a in apps.get("activeapps", []) + apps.get("completedapps", [])]
        assert "tablestore-service" in names   # the compaction was the service's Spark job on the cluster
        assert t.read().num_rows == 12
        assert max(n for p in t.describe()["partitions"] for n in p["sorted_runs"].values()) < 6
    finally:
        stopped = subprocess.run([*cli, "stop"], capture_output=True, text=True, env=env, timeout=300)
    assert stopped.stdout.strip() == "stopped"
