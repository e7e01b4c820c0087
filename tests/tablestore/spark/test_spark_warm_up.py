"""`tablestore.spark.session()` starts a first write's Python processes in the background (tablestore/spark/
warm_up.py): a user's first write then starts none of its own, and nothing is left behind. In a process of its own
(the tests' shared session warmed up long ago)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

TESTS = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, os, sys
sys.path.insert(0, sys.argv[2])
import pyarrow as pa, pyarrow.parquet as pq
from hang_watchdog import command_of, descendants
import tablestore, tablestore.spark
from tablestore.spark import warm_up
from tablestore.spark.sessions import WAREHOUSE_CONF

def processes():
    """The Python processes below this one that a write needs: name -> pids."""
    found = {}
    for pid in descendants(os.getpid()):
        command = command_of(pid)
        for name in ("tablestore.spark.catalog_service", "pyspark.sql.worker.write_into_data_source",
                     "pyspark.worker"):
            if command.endswith(name):
                found.setdefault(name, []).append(pid)
    return found

wh = sys.argv[1]
out = {}
spark = tablestore.spark.local_session("warm-on", cores=1, conf={WAREHOUSE_CONF: wh, warm_up.SWITCH_CONF: "true"})
warm_up._started[spark.sparkContext.applicationId].join(120)
warmed = processes()
out["on"] = {name: len(pids) for name, pids in warmed.items()}
out["scratch_left"] = sorted(p for p in os.listdir(os.environ["TMPDIR"]) if p.startswith("tablestore-warm-up-"))

cat = tablestore.Catalog(wh)
cat.create_database("db")
cat.create_table("db.t", pa.schema([pa.field("id", pa.int64(), False), ("v", pa.string())]), primary_key=["id"])
src = os.path.join(wh, "src")
os.makedirs(src)
pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64()), "v": ["a", "b", "c"]}), os.path.join(src, "0.parquet"))
query = (spark.readStream.schema("id BIGINT, v STRING").parquet(src).writeStream.format("managed")
         .option("checkpointLocation", os.path.join(wh, "ck")).trigger(availableNow=True).start("db.t"))
query.awaitTermination(300)
out["rows"] = sorted(tuple(r) for r in spark.read.format("managed").load("db.t").collect())
after = processes()
out["new_workers"] = sorted(set(after.get("pyspark.worker", [])) - set(warmed.get("pyspark.worker", [])))
out["databases"] = cat.list_databases()
spark.stop()
# switched off
spark = tablestore.spark.local_session("warm-off", cores=1, conf={WAREHOUSE_CONF: wh, warm_up.SWITCH_CONF: "false"})
out["off_started"] = spark.sparkContext.applicationId in warm_up._started
spark.stop()
print("RESULT " + json.dumps(out))
'''


def test_a_session_starts_a_first_write_s_python_processes_and_leaves_nothing(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1", "TMPDIR": str(scratch)}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "wh"), str(TESTS)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert result, done.stderr[-4000:]
    out = json.loads(result[0][len("RESULT "):])
    # on (at once: `auto` would wait for idle CPUs): the catalog service, the commit service, the write planner's daemon, the tasks' daemon and its worker
    assert out["on"]["tablestore.spark.catalog_service"] == 2, out
    assert out["on"].get("pyspark.sql.worker.write_into_data_source", 0) >= 1, out
    assert out["on"]["pyspark.worker"] >= 2
    assert out["scratch_left"] == []   # the scratch warehouse is deleted
    # the user's first write (a streaming one) is written by the warmed worker: no new task worker
    assert out["rows"] == [[1, "a"], [2, "b"], [3, "c"]]
    assert out["new_workers"] == []
    assert out["databases"] == ["db"]   # nothing of the warm-up's in the session's warehouse
    assert out["off_started"] is False


class _Conf:
    def __init__(self, value: str | None) -> None:
        self.value = value

    def get(self, key: str, default: str) -> str:
        return default if self.value is None else self.value


class _Session:
    def __init__(self, value: str | None, master: str = "local[2]") -> None:
        self.conf = _Conf(value)
        self.sparkContext = type("Context", (), {"master": master})()


def test_the_warm_up_s_setting() -> None:
    from tablestore.errors import TableStoreError
    from tablestore.spark import warm_up

    assert warm_up.mode(_Session(None)) == "auto"   # type: ignore[arg-type]
    assert warm_up.mode(_Session(" TRUE ")) == "true"   # type: ignore[arg-type]
    assert warm_up.mode(_Session("true", master="spark://127.0.0.1:7077")) == "false"   # type: ignore[arg-type]
    with pytest.raises(TableStoreError, match="spark.tablestore.warm-up='yes': expected one of auto, true, false"):
        warm_up.mode(_Session("yes"))   # type: ignore[arg-type]


def test_auto_waits_for_a_second_of_idle_cpus() -> None:
    from tablestore.spark import warm_up

    def fed(idle_shares: list[float]) -> tuple[bool, int]:
        """Samples whose successive windows have these idle shares (100 jiffies each); (started, windows waited)."""
        samples = [(0.0, 0.0)]
        for share in idle_shares:
            samples.append((samples[-1][0] + 100 * share, samples[-1][1] + 100))
        it = iter(samples)
        slept: list[float] = []
        started = warm_up.wait_for_idle_cpus(lambda: next(it, None), slept.append,
                                             give_up_s=warm_up.IDLE_WINDOW_S * (len(samples) - 1))
        return started, len(slept)

    assert fed([0.1, 0.6, 0.2, 0.5, 0.9]) == (True, 5)   # two quiet windows in a row: the 4th and 5th
    assert fed([0.1, 0.6, 0.2, 0.6, 0.1]) == (False, 5)  # never two in a row before giving up
    assert warm_up.wait_for_idle_cpus(lambda: None, lambda s: None) is True   # no /proc/stat: at once
