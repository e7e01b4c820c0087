"""One local SparkSession for every Spark test of the session (starting Spark costs seconds).

It carries Delta Lake too when a Delta build runs on the installed PySpark (the development default does), so the
test that joins a managed and a Delta table runs in the same session. It never registers the `managed` data
source: PySpark finds it through the top-level module `pyspark_managed` (static registration)."""
from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

from tablestore.spark import local_session
from tablestore.spark.delta import DeltaUnsupportedError, delta_conf, spark_minor, DELTA_BUILDS


def _delta() -> dict[str, str]:
    if spark_minor() not in DELTA_BUILDS:
        return {}
    try:
        return delta_conf()
    except DeltaUnsupportedError:
        if os.environ.get("CI"):
            raise   # CI must run the Delta test on a PySpark Delta supports
        return {}


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("tablestore-tests", conf=_delta())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
