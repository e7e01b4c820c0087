"""The tablestore Spark jar: the JVM half of the Spark integration (the in-job upsert materializer operator,
`java/tablestore/spark/jvm/`), compiled from the sources shipped in this package against the installed
PySpark's own jars, on first use, and cached.

Why a JVM operator: Spark's Python stateful APIs cost ~150 µs per key and micro-batch before any work
(`bench/spark_tws_floor.py`), and even a stateless Python pass-through costs about twice a JVM stateful
aggregation; the JVM operator runs the materializer at JVM speed. The Python library
(`tablestore.materializer`) stays the reference semantics; a differential test holds the two to the same
output.

The jar must be on the session's classpath when the session starts: `local_session()` puts it there; for a
session of your own, set ``spark.jars`` to `jar_path()`. Building needs a JDK (``javac``, from ``JAVA_HOME``
or the PATH). Cache: ``$TABLESTORE_CACHE_DIR`` or ``~/.cache/tablestore``; the file name carries the Spark
version and a digest of the sources, so an upgrade rebuilds (and removes the jars of earlier sources for that
Spark version; the jars of other Spark versions stay).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from tablestore.errors import TableStoreError
from tablestore.spark import jvm_contract

SOURCES = Path(__file__).resolve().parent / "java"
VERSIONED_SOURCES = Path(__file__).resolve().parent / "java_versions"
"""`spark-<major>.<minor>/`: the classes that touch Spark internals or behaviour which change between releases (the
Python data source bridge of the SQL catalog, what a Spark version supports). The build takes every folder at or
below the installed version, a newer folder's file replacing the same file of an older one."""
MAIN_CLASS = "tablestore.spark.jvm.UpsertMaterialize"


class SparkJarError(TableStoreError):
    """The tablestore Spark jar cannot be built, or the session does not have it."""


STALE_JAR_S = 7 * 24 * 3600
"""A built jar of other sources than the checkout's is removed once unused for this long."""


def cache_dir() -> Path:
    configured = os.environ.get("TABLESTORE_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tablestore"


def _pyspark() -> tuple[str, Path]:
    import pyspark

    return pyspark.__version__, Path(pyspark.__file__).resolve().parent / "jars"


def _javac() -> str:
    home = os.environ.get("JAVA_HOME")
    candidates = [str(Path(home) / "bin" / "javac")] if home else []
    found = shutil.which("javac")
    candidates += [found] if found else []
    for candidate in candidates:
        if os.access(candidate, os.X_OK):
            return candidate
    raise SparkJarError("building the tablestore Spark jar needs a JDK: no javac in $JAVA_HOME/bin or on the PATH "
                        "(install a JDK 17+, e.g. the openjdk-17-jdk-headless package)")


def _minor(text: str) -> tuple[int, int]:
    major, minor = text.split(".")[:2]
    return int(major), int(minor)


def versioned_sources(version: str) -> list[Path]:
    """The version-specific sources for PySpark `version` (see VERSIONED_SOURCES): every folder at or below it, a
    file of a newer folder replacing the file of the same path in an older one."""
    folders = {_minor(p.name[len("spark-"):]): p for p in VERSIONED_SOURCES.glob("spark-*") if p.is_dir()}
    fitting = sorted(v for v in folders if v <= _minor(version))
    if not fitting:
        supported = ", ".join(f"{a}.{b}" for a, b in sorted(folders))
        raise SparkJarError(f"PySpark {version} is older than every Spark version the tablestore jar supports "
                            f"(sources for: {supported})")
    chosen: dict[Path, Path] = {}
    for v in fitting:
        for source in folders[v].rglob("*.java"):
            chosen[source.relative_to(folders[v])] = source
    return [chosen[k] for k in sorted(chosen)]


def jar_path() -> Path:
    """The jar for the installed PySpark, built now if not cached."""
    version, spark_jars = _pyspark()
    sources = sorted(SOURCES.rglob("*.java")) + versioned_sources(version)
    contract = jvm_contract.java_source()   # the names Python owns, generated (jvm_contract.py)
    digest = hashlib.sha256(version.encode() + b"\0" + contract.encode())
    for source in sources:
        root = SOURCES if SOURCES in source.parents else VERSIONED_SOURCES
        digest.update(source.relative_to(root).as_posix().encode() + b"\0" + source.read_bytes())
    target = cache_dir() / f"tablestore-spark-{version}-{digest.hexdigest()[:16]}.jar"
    if target.exists():
        os.utime(target)   # in use: kept by the clean-up below
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tablestore-jar-", dir=target.parent) as tmp:
        classes = Path(tmp) / "classes"
        generated = Path(tmp) / "generated" / jvm_contract.JAVA_PATH
        generated.parent.mkdir(parents=True)
        generated.write_text(contract)
        cmd = [_javac(), "--release", "17", "-nowarn", "-encoding", "UTF-8", "-d", str(classes),
               "-cp", str(spark_jars / "*"), *map(str, sources), str(generated)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SparkJarError(f"compiling the tablestore Spark jar against PySpark {version} failed:\n"
                                f"{done.stdout}{done.stderr}")
        built = Path(tmp) / target.name
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\nCreated-By: tablestore\n\n")
            for cls in sorted(classes.rglob("*.class")):
                jar.write(cls, cls.relative_to(classes).as_posix())
        os.replace(built, target)   # atomic: a concurrent builder just replaces an identical jar
    # jars of other sources for this Spark version that nothing used for a week: another checkout (a branch, a
    # worktree) sharing this cache still uses its own, and other versions' jars stay (one venv per Spark version)
    for old in target.parent.glob(f"tablestore-spark-{version}-*.jar"):
        if old != target and time.time() - old.stat().st_mtime > STALE_JAR_S:
            old.unlink(missing_ok=True)   # a JVM still using one keeps its open file
    return target
