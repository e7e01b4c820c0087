"""One local SparkSession for every Spark test of the session (starting Spark costs seconds).

It carries Delta Lake too when a Delta build runs on the installed PySpark (the development default does), so the
test that joins a managed and a Delta table runs in the same session. It never registers the `managed` data
source: PySpark finds it through the top-level module `pyspark_managed` (static registration)."""
from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyspark
import pytest

from tablestore.spark import local_session
from tablestore.spark.sessions import WAREHOUSE_CONF
from tablestore.spark.delta import DeltaUnsupportedError, delta_conf, spark_minor, DELTA_BUILDS


HERE = Path(__file__).resolve().parent
PYSPARK_4_1 = tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 2)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """PySpark 4.1's py4j result sockets are left to the garbage collector (fixed in 4.2): with
    filterwarnings=error their ResourceWarning would fail whichever Spark test runs the collection."""
    if not PYSPARK_4_1:
        return
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.filterwarnings("ignore:unclosed <socket.socket:ResourceWarning"))
            item.add_marker(pytest.mark.filterwarnings(
                "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"))


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
def spark_warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's default warehouse (`tablestore.spark.session(warehouse=...)`)."""
    return tmp_path_factory.mktemp("spark-warehouse")


@pytest.fixture(scope="session")
def spark(spark_warehouse: Path) -> Iterator[Any]:
    session = local_session("tablestore-tests", conf={WAREHOUSE_CONF: str(spark_warehouse), **_delta()}, kafka=True)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
