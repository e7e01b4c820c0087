"""Cold starts a new user sees (issue 52), each against a plain PySpark session started in the same run.

    python bench/cold_start_bench.py [--runs 2]

Every measurement is a fresh process (what a user's command is), from the moment it is launched, the variants
interleaved run by run (the machine's load drifts); medians are printed and written to bench/out/cold_start.json:
- `python`: `python -c pass`, and `import tablestore.cli` (the CLI's own imports);
- `plain session`: `SparkSession.builder.master("local[2]").getOrCreate()` then `spark.range(1).count()`: Spark's own
  start, the floor of everything below;
- `tablestore session`: `tablestore.spark.session(warehouse, master="local[2]", kafka=True)` then the same query:
  what tablestore adds to a session (its jar, the Kafka connector's jars, the catalog, the extension, the log file);
- `ingest first commit`: `tablestore ingest --create --trigger-interval 1s` of a topic holding 3 records, to its
  first snapshot on disk;
- `ingest --available-now`: the same with `--available-now`, to the process's exit (and to its first snapshot);
- `sql first write`: `tablestore sql -e "CREATE DATABASE ...; CREATE TABLE ...; INSERT ..."` to its exit, against
  PySpark's own `bin/spark-sql -e "SELECT 1"`.
The Kafka broker is the project's own on port 39092 (`--port`), started for the run unless already up there. Figures
depend on the machine's load: take them on a quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
PYTHON = sys.executable
CLI = [PYTHON, "-m", "tablestore.cli"]

_SESSION = r'''
import sys, time
variant = sys.argv[1]
if variant == "plain":
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1").getOrCreate())
else:
    import tablestore.spark
    spark = tablestore.spark.session(sys.argv[2], master="local[2]", kafka=True)
ready = time.time()
spark.range(1).count()
print(ready, time.time())
'''


def _env(port: int) -> dict[str, str]:
    return {**os.environ, "TABLESTORE_KAFKA_PORT": str(port), "PYTHONPATH": str(ROOT),
            "SPARK_LOCAL_IP": "127.0.0.1"}


def _snapshot(warehouse: Path, table: str) -> Path:
    db, name = table.split(".")
    return warehouse / f"{db}.db" / name / "snapshot" / "snapshot-1"


def _until(path: Path, proc: subprocess.Popen[bytes], started: float, timeout_s: float = 300) -> float | None:
    """Seconds from `started` to `path` existing, polled every 50 ms (None: the process ended first)."""
    deadline = started + timeout_s
    while time.time() < deadline:
        if path.exists():
            return time.time() - started
        if proc.poll() is not None:
            return time.time() - started if path.exists() else None
        time.sleep(0.05)
    return None


def _wall(cmd: list[str], env: dict[str, str]) -> float:
    started = time.time()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {done.stderr.decode()[-2000:]}")
    return time.time() - started


def _session(variant: str, env: dict[str, str], tmp: Path) -> dict[str, float]:
    started = time.time()
    done = subprocess.run([PYTHON, "-c", _SESSION, variant, str(tmp / f"wh-{variant}")], env=env,
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"{variant} session failed: {done.stderr[-2000:]}")
    ready, queried = (float(x) for x in done.stdout.split()[-2:])
    return {"session_s": ready - started, "first_query_s": queried - started}


def _topic(bootstrap: str) -> str:
    import logstore
    from logstore.kafka import KafkaAdmin

    topic = f"cold-{time.time_ns()}"
    KafkaAdmin({"bootstrap.servers": bootstrap}).create_topic(topic, 1, None)
    records = [(json.dumps({"id": i}).encode(), json.dumps(
        {"before": None, "after": {"id": i, "name": f"n{i}"}, "op": "c", "ts_ms": 1}).encode()) for i in range(3)]
    logstore.produce_raw({"bootstrap.servers": bootstrap}, topic, records)
    return topic


def _ingest(bootstrap: str, env: dict[str, str], tmp: Path, available_now: bool) -> dict[str, float | None]:
    topic, warehouse = _topic(bootstrap), tmp / f"wh-ingest-{time.time_ns()}"
    mode = ["--available-now"] if available_now else ["--trigger-interval", "1s"]
    started = time.time()
    proc = subprocess.Popen([*CLI, "ingest", "db.c", "--topic", topic, "--bootstrap-servers", bootstrap,
                             "--warehouse", str(warehouse), "--create", "--master", "local[2]", *mode],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    first = _until(_snapshot(warehouse, "db.c"), proc, started)
    if available_now:
        proc.wait(600)
        return {"first_commit_s": first, "exit_s": time.time() - started}
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(120)
    return {"first_commit_s": first}


def _sql(env: dict[str, str], tmp: Path) -> dict[str, float | None]:
    warehouse = tmp / f"wh-sql-{time.time_ns()}"
    statements = ("CREATE DATABASE managed.db; CREATE TABLE managed.db.t (id BIGINT, v STRING); "
                  "INSERT INTO managed.db.t VALUES (1, 'a');")
    started = time.time()
    proc = subprocess.Popen([*CLI, "sql", "--warehouse", str(warehouse), "-e", statements], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    first = _until(_snapshot(warehouse, "db.t"), proc, started)
    proc.wait(600)
    return {"first_commit_s": first, "exit_s": time.time() - started}


def _plain_spark_sql(env: dict[str, str]) -> float:
    import pyspark

    return _wall([str(Path(pyspark.__file__).resolve().parent / "bin" / "spark-sql"), "-S", "-e", "SELECT 1"], env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--port", type=int, default=39092)
    args = parser.parse_args()
    env = _env(args.port)
    os.environ.update({"TABLESTORE_KAFKA_PORT": str(args.port),
                       "TABLESTORE_KAFKA_DIR": str(ROOT / ".cache" / f"kafka-run-bench-{args.port}")})
    from logstore import broker

    started_broker = broker.status() is None
    bootstrap = broker.status() or broker.start()
    samples: dict[str, list[float]] = {}

    def add(name: str, value: float | None) -> None:
        if value is not None:
            samples.setdefault(name, []).append(value)

    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            _session("plain", env, tmp)   # a warm machine: jars and caches read once before measuring
            for run in range(args.runs):
                add("python -c pass", _wall([PYTHON, "-c", "pass"], env))
                add("import tablestore.cli", _wall([PYTHON, "-c", "import tablestore.cli"], env))
                for variant in ("plain", "tablestore"):
                    for key, value in _session(variant, env, tmp).items():
                        add(f"{variant} {key}", value)
                add("ingest first commit", _ingest(bootstrap, env, tmp, available_now=False)["first_commit_s"])
                once = _ingest(bootstrap, env, tmp, available_now=True)
                add("ingest --available-now first commit", once["first_commit_s"])
                add("ingest --available-now exit", once["exit_s"])
                sql = _sql(env, tmp)
                add("sql first write committed", sql["first_commit_s"])
                add("sql first write exit", sql["exit_s"])
                add("plain spark-sql SELECT 1 exit", _plain_spark_sql(env))
                print(f"run {run + 1}/{args.runs} done", flush=True)
    finally:
        if started_broker:
            broker.stop()
    medians = {k: round(statistics.median(v), 2) for k, v in samples.items()}
    plain = medians["plain session_s"]
    print(f"\n{'measurement':<42}{'median s':>10}{'x plain session':>17}")
    for name, value in medians.items():
        print(f"{name:<42}{value:>10.2f}{value / plain:>17.2f}")
    OUT.mkdir(exist_ok=True)
    result = {"runs": args.runs, "medians_s": medians, "samples_s": samples, "cpus": os.cpu_count(),
              "load_avg": os.getloadavg()}
    (OUT / "cold_start.json").write_text(json.dumps(result, indent=2))
    print(f"wrote {OUT / 'cold_start.json'}")


if __name__ == "__main__":
    main()
