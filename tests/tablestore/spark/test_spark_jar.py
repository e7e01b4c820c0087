"""Building the tablestore Spark jar: cached by content, rebuilt for other sources, a clear error without a JDK."""
from __future__ import annotations

import os
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from tablestore.spark import jar
from tablestore.spark.jar import SparkJarError, jar_path


@pytest.mark.skipif(shutil.which("javac") is None, reason="needs a JDK (CI has one: the Spark tests need it)")
def test_the_jar_is_built_once_and_rebuilt_when_the_sources_change(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TABLESTORE_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
    other_spark = tmp_path / "cache" / "tablestore-spark-9.9.9-0123456789abcdef.jar"   # another venv's PySpark
    other_spark.write_bytes(b"jar")
    first = jar_path()
    assert "tablestore/spark/jvm/UpsertMaterialize.class" in zipfile.ZipFile(first).namelist()
    inode = first.stat().st_ino
    assert jar_path() == first and first.stat().st_ino == inode   # cached, not rebuilt

    sources = tmp_path / "java"
    shutil.copytree(jar.SOURCES, sources)
    extra = sources / "tablestore" / "spark" / "jvm" / "mirror" / "History.java"
    extra.write_text(extra.read_text() + "\n// changed\n")
    monkeypatch.setattr(jar, "SOURCES", sources)
    second = jar_path()
    assert second != first and second.exists()
    assert first.exists()   # another checkout sharing the cache may still use it
    week_ago = time.time() - jar.STALE_JAR_S - 60
    os.utime(first, (week_ago, week_ago))
    extra.write_text(extra.read_text() + "\n// changed again\n")
    third = jar_path()
    assert not first.exists() and second.exists() and third.exists()   # only the jar unused for a week goes
    assert other_spark.exists()   # the jar of another Spark version stays


def test_without_a_jdk_the_error_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TABLESTORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(SparkJarError, match="javac"):
        jar_path()
