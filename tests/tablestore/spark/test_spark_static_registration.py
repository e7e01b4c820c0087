"""A SparkSession built by hand (the jar on spark.jars, no register call, started outside the repository) finds
the `managed` data source (the jar's JVM provider, delegating to the Python source that PySpark's static lookup of
the top-level module `pyspark_managed` registers), for batch reads, for streaming reads of changes without a
schema, and for batch writes clustered by bucket (the data source's hidden catalog needs no catalog conf)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

SCRIPT = textwrap.dedent("""
    import sys
    import pyarrow as pa
    from pyspark.sql import SparkSession
    import tablestore
    from tablestore.spark import jar_path

    wh = sys.argv[1]
    cat = tablestore.Catalog(wh)
    cat.create_database("db")
    t = cat.create_table("db.o", pa.schema([pa.field("id", pa.int64(), False)]), primary_key=["id"])
    t.write(pa.table({"id": [1, 2, 3]}))
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .config("spark.jars", str(jar_path()))
             .config("spark.sql.python.filterPushdown.enabled", "true").getOrCreate())
    print("COUNT", spark.read.format("managed").option("warehouse", wh).load("db.o").filter("id > 1").count())
    changes = spark.readStream.format("managed").option("warehouse", wh).load("db.o")
    print("STREAM", changes.isStreaming, changes.columns)
    q = changes.writeStream.format("memory").queryName("changes").trigger(availableNow=True).start()
    q.awaitTermination()
    print("CHANGES", sorted(tuple(r) for r in spark.sql("SELECT * FROM changes").collect()))
    print("BATCH", spark.read.format("managed").option("warehouse", wh).load("db.o").columns)
    w = cat.create_table("db.w", pa.schema([pa.field("id", pa.int64(), False)]), primary_key=["id"],
                         options={"bucket": "2"})
    spark.range(0, 40, numPartitions=4).write.format("managed").option("warehouse", wh).mode("append").save("db.w")
    print("RUNS", sorted(f["bucket"] for f in w.files()), w.read().num_rows)
    spark.stop()
""")


def test_a_session_built_by_hand_finds_managed_without_registering_it(tmp_path: Path) -> None:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "wh")], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert "COUNT 2" in done.stdout, done.stderr[-3000:]
    assert "STREAM True ['_row_kind', 'id']" in done.stdout, done.stderr[-3000:]
    assert "CHANGES [('+I', 1), ('+I', 2), ('+I', 3)]" in done.stdout, done.stderr[-3000:]
    assert "BATCH ['id']" in done.stdout, done.stderr[-3000:]
    assert "RUNS [0, 1] 40" in done.stdout, done.stderr[-3000:]   # 4 input partitions, one writer per bucket


class _Conf:
    def __init__(self, python: str) -> None:
        self.python = python

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.python if key == "spark.pyspark.python" else default


class _Session:
    def __init__(self, python: str) -> None:
        self.conf = _Conf(python)


def test_a_session_asks_the_workers_python_whether_the_lookup_will_find_managed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`session()` skips Spark's own lookup (a worker importing tablestore, about 0.9 s) when the workers' Python
    finds `pyspark_managed` on a path entry; a Python that does not (a bare venv) sends it to the lookup and, if
    that fails too, to the runtime registration."""
    import venv

    from tablestore.spark.sessions import _found_statically

    monkeypatch.chdir(tmp_path)   # not the repository's root, whose pyspark_managed.py a `-c` Python would see
    assert _found_statically(_Session(sys.executable))   # type: ignore[arg-type]
    venv.EnvBuilder(with_pip=False).create(tmp_path / "bare")
    assert not _found_statically(_Session(str(tmp_path / "bare" / "bin" / "python")))   # type: ignore[arg-type]
    assert not _found_statically(_Session(str(tmp_path / "no-such-python")))   # type: ignore[arg-type]
