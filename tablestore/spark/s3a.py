"""Hadoop's S3A file system for a session on an S3 warehouse: the jars, the settings, and `s3a://` paths for the JVM.

PySpark ships Hadoop's client (`hadoop-client-api-<version>.jar`) but not `hadoop-aws`, so without it Spark's JVM
opens no `s3://` or `s3a://` path: streaming checkpoints could not live in the bucket, and the JVM's fast paths (the
raw-split reader, the JVM writer) handed S3 tables to Python. `session()` adds S3A by itself when a warehouse or a
catalog option names S3 (`session_settings`):

- the jars: `hadoop-aws` of exactly PySpark's Hadoop version (S3A is built per Hadoop release) and its runtime
  dependencies, the AWS SDK v2 `bundle` (about 700 MB, shaded), `analyticsaccelerator-s3` and `wildfly-openssl`,
  from Maven Central through `scripts/hadoop-aws/pom.xml`, cached in `.cache/hadoop-aws/hadoop-<version>/` (once per
  machine; tablestore/spark/maven.py). `TABLESTORE_HADOOP_AWS_LIBS` names a directory holding them already (an image
  without mvn). A local session puts them on the JVM's class path (`spark.driver.extraClassPath`: `spark.jars`
  would copy the 700 MB into every session's scratch directory); a cluster's session ships them to its executors
  (`spark.jars`), unless `spark.tablestore.s3a.ship=false` says they are at the same paths there.
- `spark.hadoop.fs.s3.impl` = S3A, so the `s3://` URLs tablestore's users write reach the JVM as they are (a
  checkpoint location, a `df.write.parquet`); paths tablestore hands the JVM itself are `s3a://` (`jvm_url`).
- the catalog's S3 options become `fs.s3a.*` (sessions.catalog_environment); the plans tablestore hands its JVM
  tasks carry them too (`hadoop_options`), so a read or write given the options per DataFrame reaches the bucket.

When the jars cannot be had (no mvn, no network), the session starts without S3A and logs why: the Python paths
read and write the warehouse as before, and checkpoints must stay on a local path.
"""
from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

from filestore import is_s3
from tablestore.errors import TableStoreError
from tablestore.spark.maven import CACHE, ROOT, MavenFetchError, cached_jars, fetch_jars

log = logging.getLogger(__name__)

POM = ROOT / "scripts" / "hadoop-aws" / "pom.xml"
LIBS_ENV = "TABLESTORE_HADOOP_AWS_LIBS"
"""A directory holding the jars already (an image or machine without mvn)."""
JAR_PREFIXES = ("hadoop-aws-", "bundle-", "analyticsaccelerator-s3-", "wildfly-openssl-")
S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
JVM_S3A_OPTION = "__jvm-s3a"
"""Set ("true") by the JVM on the scans and writes it plans when S3A is on its class path (ManagedTable.java,
JvmBatchWrite.java: the same constant): only then do read.py and jvm_write.py hand S3 files to the JVM."""
SWITCH_CONF = "spark.tablestore.s3a"
"""false: a session on S3 gets no S3A (its JVM then reads and writes nothing on S3: Python does)."""
SHIP_CONF = "spark.tablestore.s3a.ship"
"""false: a cluster's executors find the jars at the driver's paths (one machine, or the same image everywhere)
instead of fetching them from the driver (about 700 MB per executor host and application)."""


def jvm_marked_s3a(options: Mapping[str, str]) -> bool:
    """Whether the JVM marked a scan's or write's `options` with JVM_S3A_OPTION (keys in any case)."""
    return any(str(k).lower() == JVM_S3A_OPTION and str(v).lower() == "true" for k, v in dict(options).items())


class S3AUnavailableError(TableStoreError):
    """The hadoop-aws jars for the installed PySpark cannot be found or fetched."""


def hadoop_version() -> str:
    """The Hadoop version PySpark ships (its `hadoop-client-api-<version>.jar`)."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar"))
    if not found:
        raise S3AUnavailableError(f"no hadoop-client-api-*.jar in {jars}: which Hadoop this PySpark runs is unknown")
    return found[-1].name[len("hadoop-client-api-"):-len(".jar")]


def s3a_jars() -> list[Path]:
    """hadoop-aws and its runtime dependencies for PySpark's Hadoop version (fetched with mvn on first use)."""
    if os.environ.get(LIBS_ENV):
        found = cached_jars(Path(os.environ[LIBS_ENV]), JAR_PREFIXES)
        if not any(j.name.startswith("hadoop-aws-") for j in found):
            raise S3AUnavailableError(f"{LIBS_ENV}={os.environ[LIBS_ENV]} must hold jars named {JAR_PREFIXES}")
        return found
    version = hadoop_version()
    try:
        return fetch_jars(f"hadoop-aws {version}", POM, CACHE / "hadoop-aws" / f"hadoop-{version}",
                          {"hadoop.version": version}, JAR_PREFIXES)
    except MavenFetchError as e:
        raise S3AUnavailableError(str(e)) from None


def to_s3a(url: str) -> str:
    """`url` with Hadoop's S3A scheme (`s3://b/k` -> `s3a://b/k`); other URLs and paths as they are."""
    return "s3a://" + url.split("://", 1)[1] if is_s3(url) else url


def jvm_url(object_store: bool, path: str) -> str:
    """The URL Spark's JVM opens for a FileIO path: `s3a://bucket/key` for an object store's `bucket/key`, the
    absolute path of a local one."""
    return "s3a://" + path.lstrip("/") if object_store else os.path.abspath(path)


def needs_s3a(settings: Mapping[str, str]) -> bool:
    """Whether a session's settings name S3: a catalog's warehouse on `s3://`/`s3a://`, or S3A settings (which
    sessions.catalog_environment derives from the catalog's `s3.*` options)."""
    return any((k.endswith(".warehouse") and is_s3(v)) or k.startswith("spark.hadoop.fs.s3a.")
               for k, v in settings.items())


def session_settings(settings: Mapping[str, str], master: str | None) -> dict[str, str]:
    """What `session()` adds to `settings` for S3 ({} when they name no S3, SWITCH_CONF is false, or the jars
    cannot be had: logged): `fs.s3.impl` and the S3A jars, on the driver's class path, and for a cluster's
    executors in `spark.jars` (shipped to each) or, with SHIP_CONF false, on their class path at the same paths."""
    if not needs_s3a(settings) or settings.get(SWITCH_CONF, "true").lower() == "false":
        return {}
    try:
        jars = [str(j) for j in s3a_jars()]
    except S3AUnavailableError as e:
        log.warning("the session's warehouse is on S3 but Spark's JVM gets no S3A file system (checkpoints must "
                    "be local; reads and writes go through Python): %s", e)
        return {}
    out = {"spark.hadoop.fs.s3.impl": settings.get("spark.hadoop.fs.s3.impl", "org.apache.hadoop.fs.s3a.S3AFileSystem")}
    local = master is None or master.startswith("local")
    ship = settings.get(SHIP_CONF, "true").lower() != "false"
    for key in ["spark.driver.extraClassPath"] + ([] if local or ship else ["spark.executor.extraClassPath"]):
        out[key] = os.pathsep.join([p for p in settings.get(key, "").split(os.pathsep) if p] + jars)
    if not local and ship:
        out["spark.jars"] = ",".join([j for j in settings.get("spark.jars", "").split(",") if j] + jars)
    return out


S3A_KEYS: Mapping[str, str] = {
    "s3.endpoint": "fs.s3a.endpoint",
    "s3.access-key": "fs.s3a.access.key",
    "s3.secret-key": "fs.s3a.secret.key",
    "s3.session-token": "fs.s3a.session.token",
    "s3.region": "fs.s3a.endpoint.region",
    "s3.path.style.access": "fs.s3a.path.style.access",
}
"""Each catalog option (catalog.fs_options) and the Hadoop S3A setting that says the same to Spark's JVM."""


def hadoop_options(catalog_options: Iterable[tuple[str, str]]) -> dict[str, str]:
    """The S3A settings (`fs.s3a.*`) saying what a table's catalog options say (`s3.endpoint`, ...: TableRef's,
    over those of the environment's TABLESTORE_CATALOG_OPTIONS, as catalog.Catalog takes them)."""
    from catalog import environment_catalog_options

    given = {**environment_catalog_options(), **dict(catalog_options)}
    return {S3A_KEYS[k]: str(v) for k, v in given.items() if k in S3A_KEYS}


def jvm_has_s3a(spark: object) -> bool:
    """Whether `spark`'s JVM can open `s3a://` paths (hadoop-aws on its class path)."""
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        jvm.java.lang.Class.forName(S3A_CLASS, False, jvm.java.lang.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:
        return False
