#!/usr/bin/env python3
"""Set up the project from nothing but the system Python, then run the demo or the tests.

    python3 scripts/dev.py demo    # create .venv, install tablestore, run the demo
    python3 scripts/dev.py test    # create .venv, install tablestore with dev extras, run the whole suite, then
                                   # the Spark tests on the oldest and newest supported PySpark (test-spark-matrix)
    python3 scripts/dev.py test-spark-matrix [VERSION ...]   # only the Spark tests, each PySpark in its own venv
    python3 scripts/dev.py setup   # only the set-up

The development default PySpark (the `dev` extra) is the newest one delta-spark supports, so the Delta tests run
in the whole suite; `.venv-spark-<version>` holds each other PySpark of the matrix (tablestore[spark,test]).
The set-up is idempotent: it re-installs only when pyproject.toml changed since the last install.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Mapping

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".tablestore-installed"
SPARK_MATRIX = ("4.1.0", "4.3.0")
"""The oldest and the newest supported PySpark (pyproject's `spark` extra); the default (`dev`) is in between."""
SPARK_TESTS = "tests/tablestore/spark"
MATRIX_SELECTION = "not version_independent"
"""What the matrix runs: every Spark test that touches a PySpark API (data source, catalog, streaming, SQL, the
JVM jar built against that Spark, the Kafka connector for it); the tests marked `version_independent` (kill -9 at
each commit point, restarts, schema evolution, bad records, a broker going away: tablestore's own logic, seconds of
Spark start each; and those that touch no PySpark API or a stable one: the catalog service's Python side, partition
predicates, the JVM bucket function, Delta beside tablestore) run once, on the default PySpark, in the whole
suite."""
NEWEST_SPARK_TESTS = tuple(f"{SPARK_TESTS}/{name}.py" for name in (
    "test_spark_jar", "test_spark_datasource", "test_spark_key_range", "test_spark_stream_read",
    "test_spark_stream_write", "test_spark_stream_commit", "test_spark_sql_catalog", "test_spark_sql_ops",
    "test_spark_sql_merge", "test_spark_user_errors", "test_spark_jvm_write", "test_spark_change_stream",
    "test_spark_worker_daemons"))
"""What the newest PySpark of the matrix runs (CI's time: keep `.ci/run` under 40 minutes on 2 cores): it compiles
the same Java sources as the default (java_versions/ gives both the spark-4.2 folder), so what can differ is how
Spark behaves under our calls, which these modules exercise: the jar, the data source's batch and streaming reads
and writes, the SQL catalog and its extension (MERGE, UPDATE, procedures, errors), raw splits through Spark's Parquet
reader, the JVM writer on Spark's parquet-mr, and PySpark's worker daemons. Left to the default and the oldest: the
filter types (the same Python code over a filter API the data source tests also cross), the SQL actions' Python
side, and the hand-built session (a process of its own, 40 s, whose registration code is the default's).
The oldest PySpark, whose Java sources (java_versions/spark-4.1) and data source API (no admission control) differ
most from the default's, runs every test of MATRIX_SELECTION: also the CDC decoding and Kafka ingestion, the
materializer, the cluster, S3A and Delta."""


MAIN_SUITE_WORKERS = ["-n", "2", "--dist", "loadfile", "--max-worker-restart", "0"]
"""The whole suite, and each PySpark of the matrix, runs in two pytest-xdist workers, each test file in one of them
(its module fixtures set up once): much of a Spark or Kafka test's time is waiting (JVM start, micro-batch
triggers, polls), so two at a time on 2 cores take less than one after the other (the main suite: 30 min instead of
38 on the same loaded machine). Each worker has its own Spark session and its own broker (tests/conftest.py).
A test that hangs is ended by pytest-timeout, which ends its worker process; xdist then ends the run, failed, rather
than start a replacement worker (in a PySpark 4.1 run of 2026-11-27 the replacement made no progress for 30 minutes:
CI would have run into its hard limit instead of failing)."""


def _run(cmd: list[str], **kwargs: object) -> int:
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT, **kwargs)  # type: ignore[arg-type]


def _venv(path: Path, requirements: list[str]) -> Path:
    """`path` holding an editable tablestore with `requirements`; re-installed when pyproject.toml changed."""
    python = path / "bin" / "python"
    stamp = path / ".tablestore-installed"
    if not python.exists():
        print(f"creating virtual environment at {path}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(path)
        if _run([str(python), "-m", "pip", "install", "--quiet", "--upgrade", "pip"]) != 0:
            sys.exit("pip upgrade failed")
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes() + " ".join(requirements).encode()).hexdigest()
    if not (stamp.exists() and stamp.read_text() == digest):
        if _run([str(python), "-m", "pip", "install", "--quiet", *requirements]) != 0:
            sys.exit(f"installing tablestore into {path} failed")
        stamp.write_text(digest)
    _launchers_use_their_venv(path)
    return python


_LAUNCHER_MARK = "# tablestore: PySpark's launchers run this venv's python"


def _launchers_use_their_venv(path: Path) -> None:
    """PySpark's pip-installed launchers (`pyspark`, `spark-submit`, `spark-sql`, ...) all source `find-spark-home`,
    which runs `python3` from PATH to find Spark: outside an activated venv that is the system's Python, which has no
    PySpark, and `.venv/bin/pyspark` fails. The venv's bin is put first on their PATH."""
    script = path / "bin" / "find-spark-home"
    if not script.exists():
        return
    text = script.read_text()
    if _LAUNCHER_MARK in text:
        return
    head, _, rest = text.partition("\n")
    line = f'PATH="$(cd "$(dirname "$0")" && pwd):$PATH"; export PATH  {_LAUNCHER_MARK}'
    script.write_text(f"{head}\n{line}\n{rest}")


# "compat" editable installs put the repository on sys.path (a .pth entry) instead of an import hook: PySpark finds
# the `managed` data source by listing top-level `pyspark_*` modules on sys.path, which an import hook hides
EDITABLE = ["--config-settings", "editable_mode=compat", "-e"]


def setup() -> None:
    _venv(VENV, [*EDITABLE, ".[dev]"])


def _matrix_venv(version: str) -> Path:
    return _venv(ROOT / f".venv-spark-{version}", [*EDITABLE, ".[spark,test]", f"pyspark=={version}"])


def test_spark_matrix(versions: list[str], pytest_args: list[str],
                      venvs: Mapping[str, "Future[Path]"] | None = None) -> int:
    """The Spark tests on each PySpark version, each in its own venv (`venvs`: being set up already); the worst exit
    code."""
    worst = 0
    for version in versions:
        python = venvs[version].result() if venvs and version in venvs else _matrix_venv(version)
        print(f"== Spark tests on PySpark {version}", flush=True)
        tests = [SPARK_TESTS] if version != SPARK_MATRIX[-1] or pytest_args else list(NEWEST_SPARK_TESTS)
        code = _run([str(python), "-m", "pytest", "-p", "no:cacheprovider", "-m", MATRIX_SELECTION, *tests,
                     *(pytest_args or MAIN_SUITE_WORKERS)])
        worst = worst or code
    return worst


def build_s3_server_in_background() -> None:
    """Start building the tests' S3 server (SeaweedFS, tests/s3_server.py: 6-9 minutes on 2 cores, once per cache)
    at a low priority while the tests that do not need it run first; its fixture waits for the build."""
    done = subprocess.run([str(PY), "tests/s3_server.py", "path"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode == 0 and Path(done.stdout.strip()).exists():
        return
    log = ROOT / ".cache" / "seaweedfs-build.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"building the tests' S3 server (SeaweedFS) in the background: {log}", flush=True)
    subprocess.Popen(["nice", "-n", "10", str(PY), "tests/s3_server.py", "build"], cwd=ROOT,
                     stdout=open(log, "ab"), stderr=subprocess.STDOUT, start_new_session=True)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "test"
    rest = argv[1:]
    setup()
    if command == "setup":
        return 0
    if command == "demo":
        return _run([str(VENV / "bin" / "tablestore"), "demo", *rest])
    if command == "test":
        env = dict(os.environ)
        build_s3_server_in_background()
        if rest:   # a selection of tests: the default PySpark only
            code = _run([str(PY), "-m", "pytest", *rest], env=env)
            if code == 5:
                print("pytest collected no tests", file=sys.stderr)
            return code
        # the matrix's venvs (a PySpark download and install each) are set up one after the other while the whole
        # suite runs, so the matrix starts as soon as the suite ends
        with ThreadPoolExecutor(1) as pool:
            venvs = {version: pool.submit(_matrix_venv, version) for version in SPARK_MATRIX}
            code = _run([str(PY), "-m", "pytest", *MAIN_SUITE_WORKERS], env=env)
            matrix = test_spark_matrix(list(SPARK_MATRIX), [], venvs)
        return code or matrix
    if command == "test-spark-matrix":
        versions = [a for a in rest if not a.startswith("-")] or list(SPARK_MATRIX)
        return test_spark_matrix(versions, [a for a in rest if a.startswith("-")])
    sys.exit(f"unknown command {command!r}: use demo, test, test-spark-matrix or setup")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
