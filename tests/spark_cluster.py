"""A Spark standalone cluster for the tests: a master and two workers (one core each) started with PySpark's own
`bin/spark-class`, so that executors run in JVMs of their own with Python workers of their own, as on a real
cluster (`local[*]` runs everything in the driver's JVM). tests/conftest.py's `spark_cluster` fixture starts it
once per session; tests that use it are marked `cluster`.

    python tests/spark_cluster.py      # run one until Ctrl-C and print its master URL
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

WORKERS = 2
WORKER_MEMORY = "1500m"


class ClusterUnavailable(RuntimeError):
    """The master or a worker did not start (the message has its log's tail)."""


@dataclass
class SparkCluster:
    master_url: str
    web_url: str
    work_dir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def alive_workers(self) -> int:
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as reply:
            return int(json.load(reply).get("aliveworkers", 0))

    def executor_pids(self) -> list[int]:
        """PIDs of the executor JVMs (CoarseGrainedExecutorBackend) the workers of this cluster launched."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" not in cmdline:
                continue
            try:   # an executor runs in its directory under the worker's: <work>/work/<app id>/<executor id>
                cwd = (entry / "cwd").resolve()
            except OSError:
                continue
            if (self.work_dir / "work").resolve() in cwd.parents:
                pids.append(int(entry.name))
        return sorted(pids)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _env(work: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "work"),   # executors' directories: each runs in its own under it
        "PYSPARK_PYTHON": sys.executable,
    })
    return env


def _launch(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def start(work: Path, timeout_s: float = 120) -> SparkCluster:
    work.mkdir(parents=True, exist_ok=True)
    (work / "work").mkdir(exist_ok=True)
    env = _env(work)
    spark_class = str(_spark_home() / "bin" / "spark-class")
    port, web = _free_port(), _free_port()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}", work)
    cluster.procs.append(_launch(
        [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(web)], env, work / "master.log"))
    for i in range(WORKERS):
        cluster.procs.append(_launch(
            [spark_class, "org.apache.spark.deploy.worker.Worker", cluster.master_url, "--cores", "1",
             "--memory", WORKER_MEMORY, "--webui-port", str(_free_port()), "--port", str(_free_port()),
             "--work-dir", str(work / "work")], env, work / f"worker-{i}.log"))
    deadline = time.monotonic() + timeout_s
    while True:
        dead = [p for p in cluster.procs if p.poll() is not None]
        if dead:
            stop(cluster)
            raise ClusterUnavailable(f"a cluster process exited: {_tails(work)}")
        with contextlib.suppress(OSError, ValueError):
            if cluster.alive_workers() == WORKERS:
                return cluster
        if time.monotonic() > deadline:
            stop(cluster)
            raise ClusterUnavailable(f"{WORKERS} workers not registered after {timeout_s} s: {_tails(work)}")
        time.sleep(0.5)


def stop(cluster: SparkCluster) -> None:
    for proc in reversed(cluster.procs):   # workers first: they stop their executors
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    for proc in cluster.procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    for pid in cluster.executor_pids():   # an executor a worker did not take down with it
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _tails(work: Path) -> str:
    parts = []
    for log in sorted(work.glob("*.log")):
        parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-1500:]}")
    return "\n".join(parts)


@contextlib.contextmanager
def running() -> Iterator[SparkCluster]:
    with tempfile.TemporaryDirectory(prefix="tablestore-cluster-") as tmp:
        cluster = start(Path(tmp))
        try:
            yield cluster
        finally:
            stop(cluster)


if __name__ == "__main__":
    with running() as c:
        print(c.master_url, c.web_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
