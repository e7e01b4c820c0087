"""Jars from Maven Central for a Spark session: one POM under `scripts/<name>/`, `mvn dependency:copy-dependencies`
into a cache directory under `.cache/`, fetched once, under a lock (two processes may ask at the same time), and
published by a rename so a half-copied directory is never used. The one owner of that procedure: Delta Lake's jars
(tablestore/spark/delta.py) and Spark's Kafka connector (tablestore/spark/kafka.py) both come through it.

`spark.jars.packages` (Ivy) cannot resolve these on machines without direct internet access, and users behind a
proxy hit the same wall; Maven uses the machine's own mirror settings.
"""
from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from tablestore.errors import TableStoreError

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache"


class MavenFetchError(TableStoreError):
    """Maven is missing, or could not fetch the jars a session needs."""


def cached_jars(libs: Path, prefixes: Sequence[str]) -> list[Path]:
    """The jars of `libs` whose names start with one of `prefixes` (empty: not fetched yet)."""
    return sorted(j for j in libs.glob("*.jar") if j.name.startswith(tuple(prefixes)))


def fetch_jars(what: str, pom: Path, libs: Path, properties: Mapping[str, str], prefixes: Sequence[str]) -> list[Path]:
    """The jars named by `prefixes` among `pom`'s runtime dependencies (resolved with `properties`), in `libs`:
    fetched with mvn on first use. `what` names them in errors ("Delta 4.4.0 for Spark 4.2")."""
    found = cached_jars(libs, prefixes)
    if found:
        return found
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenFetchError(f"fetching {what} needs Maven (mvn) on the PATH")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / "fetch.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = cached_jars(libs, prefixes)
        if found:
            return found
        tmp = libs.parent / f".libs-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        cmd = [mvn, "-B", "-q", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
               *(f"-D{k}={v}" for k, v in properties.items()), f"-DoutputDirectory={tmp}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-20:])
            raise MavenFetchError(f"mvn could not fetch {what}:\n{tail}")
        for jar in tmp.glob("*.jar"):
            if not jar.name.startswith(tuple(prefixes)):
                jar.unlink()
        shutil.rmtree(libs, ignore_errors=True)
        os.replace(tmp, libs)
    return cached_jars(libs, prefixes)
