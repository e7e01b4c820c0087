"""Delta Lake beside managed tables in one Spark session: which Delta build fits the installed PySpark, its jars
(from Maven Central through `scripts/delta/pom.xml`, cached in `.cache/delta/`), and the session settings.

Delta Lake publishes its Spark jars per Spark minor version (`io.delta:delta-spark_<minor>_2.13`). With Delta
4.4.0: the 4.2 build works on PySpark 4.2, the 4.1 build on 4.1; there is
none for 4.3, where the 4.1/4.2 builds write a table and then fail on the first read (`NoSuchMethodError`; see
issue 12). `tests/tablestore/spark/test_spark_delta.py` runs both formats in one session.

    conf = delta_conf()                     # DeltaUnsupportedError on a PySpark without a Delta build
    spark = tablestore.spark.session(warehouse="/wh", **conf)
"""
from __future__ import annotations

import os
from pathlib import Path

from tablestore.errors import TableStoreError
from tablestore.spark.maven import CACHE as MAVEN_CACHE
from tablestore.spark.maven import MavenFetchError, fetch_jars

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "scripts" / "delta" / "pom.xml"
CACHE = MAVEN_CACHE / "delta"

DELTA_BUILDS: dict[str, str] = {"4.1": "4.4.0", "4.2": "4.4.0"}
"""PySpark minor version -> the Delta Lake release whose Spark build runs on it."""

JAR_PREFIXES = ("delta-spark_", "delta-storage-")
"""The jars a session needs: the rest of the POM's dependencies (Hadoop, Parquet, Jackson, Scala) Spark ships."""


class DeltaUnsupportedError(TableStoreError):
    """No Delta Lake build for this PySpark, or its jars cannot be fetched."""


def spark_minor() -> str:
    import pyspark

    return ".".join(pyspark.__version__.split(".")[:2])


def delta_version() -> str:
    minor = spark_minor()
    if minor not in DELTA_BUILDS:
        raise DeltaUnsupportedError(f"no Delta Lake build runs on PySpark {minor}: Delta supports PySpark "
                                    f"{', '.join(sorted(DELTA_BUILDS))} (see docs/spark.md)")
    return DELTA_BUILDS[minor]


def delta_jars() -> list[Path]:
    """The Delta jars for the installed PySpark, fetched with mvn into `.cache/delta/` on first use."""
    minor, version = spark_minor(), delta_version()
    libs = Path(os.environ.get("TABLESTORE_DELTA_LIBS", CACHE / f"spark-{minor}-delta-{version}"))
    try:
        return fetch_jars(f"Delta {version} for Spark {minor}", POM, libs,
                          {"spark.minor": minor, "delta.version": version}, JAR_PREFIXES)
    except MavenFetchError as e:
        raise DeltaUnsupportedError(str(e)) from None


def delta_conf() -> dict[str, str]:
    """Spark settings that add Delta Lake to a session (give them to `tablestore.spark.session`)."""
    return {
        "spark.jars": ",".join(str(j) for j in delta_jars()),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }
