#!/usr/bin/env python3
"""Build Apache Paimon's Spark 4.1 runtime jar from its source, for bench/spark_peers.py (cached).

    python3 scripts/paimon/build.py [--source DIR] [--tag release-2.0.0]   # prints the jar's path

Paimon publishes no Spark 4.1 runtime on the Maven Central this project reaches, nor its source release, so the
benchmark builds one: from a git repository of apache/paimon (`--source`, or $PAIMON_SOURCE; a bare mirror or a
clone: the tag is exported with `git archive`) or from an unpacked source release (a tree with `pom.xml`). Maven
fetches the build's dependencies from Maven Central. About 8-15 minutes on 2 cores, once: the jar is cached in
.cache/paimon/<version>/ and later calls print its path at once. Paimon 2.0 runs on PySpark 4.1 only.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "paimon"
DEFAULT_TAG = "release-2.0.0"
MIRROR = Path("/work/.mirror/apache+paimon/repo")
MODULE = "paimon-spark/paimon-spark-4.1"
COMPILE_SPARK = "4.1.0"
"""The Spark the jar compiles against (`provided`: the session's own runs it): the spark-hive of 4.1.1 and 4.1.2
(through spark-pipelines) does not resolve on the Maven Central this machine reaches, 4.1.0's does, and a patch
release does not change the APIs Paimon compiles against."""


def version_of(tag: str) -> str:
    return tag.removeprefix("release-")


def jar_path(tag: str = DEFAULT_TAG) -> Path:
    return CACHE / version_of(tag) / f"paimon-spark-4.1_2.13-{version_of(tag)}.jar"


def _source_tree(source: Path, tag: str) -> Path:
    """The tag's source, unpacked once under .cache/paimon/ (a rebuild after a failure starts from it)."""
    if (source / "pom.xml").exists() and not (source / ".git").exists():
        return source   # an unpacked source release
    tree = CACHE / f"src-{version_of(tag)}"
    if (tree / "pom.xml").exists():
        return tree
    tree.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="paimon-src-") as tmp:
        archive = Path(tmp) / "src.tar"
        git_dir = str(source / ".git") if (source / ".git").exists() else str(source)
        subprocess.run(["git", "--git-dir", git_dir, "archive", "--format=tar", "-o", str(archive), tag], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tree, filter="data")
    return tree


def _without_test_modules(tree: Path) -> None:
    """Drop the Spark module's tests and its test-only dependency on paimon-spark-ut: that module's own dependencies
    (Aliyun's Jindo SDK) come from a repository outside Maven Central, and the runtime jar does not need them."""
    shutil.rmtree(tree / MODULE / "src" / "test", ignore_errors=True)
    pom = tree / MODULE / "pom.xml"
    text = pom.read_text()
    dropped = re.sub(r"\s*<dependency>(?:(?!</dependency>).)*?paimon-spark-ut_(?:(?!</dependency>).)*?</dependency>",
                     "", text, flags=re.S)
    if dropped != text:
        pom.write_text(dropped)


def build(source: Path, tag: str = DEFAULT_TAG) -> Path:
    out = jar_path(tag)
    if out.exists():
        return out
    if not source.exists():
        sys.exit(f"no Paimon source at {source}: pass --source DIR (a git clone of https://github.com/apache/paimon "
                 f"or an unpacked source release)")
    tree = _source_tree(source, tag)
    _without_test_modules(tree)
    cmd = ["mvn", "-B", "-q", "-Pspark4", "-pl", MODULE, "-am", "package", "-DskipTests",
           "-Dcheckstyle.skip", "-Dspotless.check.skip", "-Dspotless.apply.skip", "-Drat.skip",
           "-Denforcer.skip", "-Dmaven.javadoc.skip", "-Dmaven.source.skip",
           f"-Dspark.version={COMPILE_SPARK}", f"-Dpaimon-spark-common.spark.version={COMPILE_SPARK}"]
    print("+", " ".join(cmd), f"(in {tree})", flush=True)
    subprocess.run(cmd, cwd=tree, check=True)
    built = tree / MODULE / "target" / out.name
    if not built.exists():
        sys.exit(f"the build left no {built}")
    out.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(built, out)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--source", type=Path, default=Path(os.environ.get("PAIMON_SOURCE", MIRROR)))
    parser.add_argument("--tag", default=DEFAULT_TAG)
    args = parser.parse_args()
    print(build(args.source, args.tag))


if __name__ == "__main__":
    main()
