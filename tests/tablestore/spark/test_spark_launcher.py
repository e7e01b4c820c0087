"""PySpark's own `pyspark` launcher in the project's venv works without the venv's bin on PATH (issue 52: its
`find-spark-home` ran the system's `python3`, which has no PySpark). scripts/dev.py sets the venv up so."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark]


@pytest.mark.version_independent
@pytest.mark.timeout(300)
def test_the_venv_s_pyspark_shell_runs_from_a_bare_path(tmp_path: Path) -> None:
    launcher = Path(sys.prefix) / "bin" / "pyspark"
    bare = {"HOME": os.environ.get("HOME", str(tmp_path)), "PATH": "/usr/bin:/bin",
            "PYSPARK_DRIVER_PYTHON_OPTS": "-i",   # a shell reading its statements from a pipe
            "SPARK_LOCAL_IP": "127.0.0.1", **({"JAVA_HOME": os.environ["JAVA_HOME"]} if "JAVA_HOME" in os.environ else {})}
    done = subprocess.run([str(launcher), "--master", "local[1]", "--conf", "spark.ui.enabled=false"],
                          input='print("counted", spark.range(3).count())\n', env=bare, cwd=tmp_path,
                          capture_output=True, text=True, timeout=280)
    assert "counted 3" in done.stdout, (done.stdout[-2000:], done.stderr[-2000:])
