"""Spark's own Kafka source and sink (`spark-sql-kafka-0-10`) for a session: the jars from Maven Central through
`scripts/spark-kafka/pom.xml`, cached in `.cache/spark-kafka/spark-<PySpark version>/`, found once per machine.

The PySpark wheel does not ship the connector. Four jars are what `spark.jars` needs: the connector,
`spark-token-provider-kafka-0-10`, `kafka-clients` and `commons-pool2`; the rest of its dependencies are jars
PySpark already has. The connector is built per Spark release; the installed release is asked for first, then the
release of the same minor version Maven Central serves (`CONNECTOR_FALLBACK`): a connector of the same minor runs
on every patch release of it.

    spark = tablestore.spark.session(warehouse="/wh", kafka=True)       # puts them on spark.jars
    spark.readStream.format("kafka").option("kafka.bootstrap.servers", ...)
"""
from __future__ import annotations

import os
from pathlib import Path

from tablestore.errors import TableStoreError
from tablestore.spark.maven import CACHE, ROOT, MavenFetchError, cached_jars, fetch_jars

POM = ROOT / "scripts" / "spark-kafka" / "pom.xml"
LIBS_ENV = "TABLESTORE_SPARK_KAFKA_LIBS"
"""A directory holding the four jars already (a machine without mvn, an air-gapped cluster)."""
JAR_PREFIXES = ("spark-sql-kafka-0-10_", "spark-token-provider-kafka-0-10_", "kafka-clients-", "commons-pool2-")

CONNECTOR_FALLBACK: dict[str, str] = {"4.1": "4.1.1", "4.2": "4.2.0", "4.3": "4.2.0"}
"""PySpark minor version -> a connector release Maven Central serves that runs on it, when the installed release's
own is not there (seen: 4.1.0, 4.1.2, 4.2.1 and 4.3.x are not served where this project is tested; 4.3 runs the
4.2 connector: tests/tablestore/spark/test_spark_cdc_*.py run on the CI's 4.3 matrix)."""


class KafkaConnectorError(TableStoreError):
    """Spark's Kafka connector cannot be fetched, or the session was started without it."""


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def kafka_jars() -> list[Path]:
    """The jars of Spark's Kafka connector for the installed PySpark (fetched with mvn on first use)."""
    if os.environ.get(LIBS_ENV):
        found = cached_jars(Path(os.environ[LIBS_ENV]), JAR_PREFIXES)
        if len(found) < len(JAR_PREFIXES):
            raise KafkaConnectorError(f"{LIBS_ENV}={os.environ[LIBS_ENV]} must hold jars named {JAR_PREFIXES}")
        return found
    version = _pyspark_version()
    minor = ".".join(version.split(".")[:2])
    libs = CACHE / "spark-kafka" / f"spark-{version}"
    candidates = [version] + [v for v in [CONNECTOR_FALLBACK.get(minor)] if v and v != version]
    errors = []
    for candidate in candidates:
        try:
            return fetch_jars(f"Spark's Kafka connector {candidate}", POM, libs, {"spark.version": candidate},
                              JAR_PREFIXES)
        except MavenFetchError as e:
            errors.append(str(e))
    raise KafkaConnectorError(f"no Kafka connector for PySpark {version} could be fetched:\n" + "\n".join(errors))


def kafka_conf() -> dict[str, str]:
    """Spark settings that add the Kafka source and sink to a session (`session(kafka=True)` applies them)."""
    return {"spark.jars": ",".join(str(j) for j in kafka_jars())}


def check_kafka_source(spark: object) -> None:
    """KafkaConnectorError unless `spark` can read Kafka (its classpath has the connector)."""
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
        jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider", True,
                                    jvm.java.lang.Thread.currentThread().getContextClassLoader())
    except Exception:
        raise KafkaConnectorError(
            "this Spark session cannot read Kafka: start it with tablestore.spark.session(..., kafka=True), or put "
            "tablestore.spark.kafka.kafka_jars() on spark.jars") from None
