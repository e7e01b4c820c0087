"""One local SparkSession for every Spark test of the session (starting Spark costs seconds)."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tablestore.spark import local_session


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    session = local_session("tablestore-tests")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
