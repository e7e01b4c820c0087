"""The Spark jar's Java twins of the file store's key rules (KeyEncoder, BucketFunction) against the golden
vectors the Python tests read too (tests/data/golden/keys.json; tests/filestore/test_golden_keys.py): a Java test,
tests/java/GoldenKeys.java, compiled against the jar and the installed PySpark's jars, run in a JVM of its own."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pyspark
import pytest

from tablestore.spark import jar

pytestmark = [pytest.mark.spark, pytest.mark.version_independent]   # the same Java source for every Spark

ROOT = Path(__file__).resolve().parents[3]


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert found, "no java (JAVA_HOME or the PATH)"
    return found


def test_the_jar_s_key_rules_give_the_golden_vectors(tmp_path: Path) -> None:
    classpath = os.pathsep.join([str(jar.jar_path()), str(Path(pyspark.__file__).parent / "jars" / "*")])
    classes = tmp_path / "classes"
    compiled = subprocess.run([jar._javac(), "-nowarn", "-d", str(classes), "-cp", classpath,
                               str(ROOT / "tests" / "java" / "GoldenKeys.java")], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    run = subprocess.run([_java(), "-cp", os.pathsep.join([str(classes), classpath]),
                          "tablestore.spark.jvm.mirror.GoldenKeys",
                          str(ROOT / "tests" / "data" / "golden" / "keys.json")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("101 cases, 0 failures")
