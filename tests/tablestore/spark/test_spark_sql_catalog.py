"""Spark SQL through the `managed` catalog (tablestore.spark.jvm.catalog.ManagedCatalog), from PySpark: the session
of conftest (`tablestore.spark.session` configures the catalog), one database per test."""
from __future__ import annotations

import itertools
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator

import pytest

import tablestore

pytestmark = pytest.mark.spark

_names = itertools.count()


@pytest.fixture
def db(spark: Any) -> Iterator[str]:
    name = f"sqldb{next(_names)}"
    spark.sql(f"CREATE DATABASE managed.{name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS managed.{name} CASCADE")


def rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(sql).collect()]


ORDERS = """CREATE TABLE managed.{db}.orders (
  id BIGINT NOT NULL, dt STRING NOT NULL, amount DECIMAL(10,2), note STRING COMMENT 'free text',
  PRIMARY KEY (id, dt) NOT ENFORCED)
PARTITIONED BY (dt) COMMENT 'orders' TBLPROPERTIES ('log.consistency' = 'eventual')"""


def test_create_insert_select_and_the_python_api_sees_it(spark: Any, spark_warehouse: Path, db: str) -> None:
    spark.sql(ORDERS.format(db=db))
    assert rows(spark, f"SHOW TABLES IN managed.{db}") == [(db, "orders", False)]
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (1, 'a', 1.5, 'x'), (2, 'b', 2.5, 'y'), (11, 'a', 3.5, 'z')")
    spark.sql(f"INSERT INTO managed.{db}.orders VALUES (1, 'a', 9.0, 'upsert')")   # a primary-key table upserts
    assert rows(spark, f"SELECT id, dt, amount, note FROM managed.{db}.orders ORDER BY id") == [
        (1, "a", Decimal("9.00"), "upsert"), (2, "b", Decimal("2.50"), "y"), (11, "a", Decimal("3.50"), "z")]
    assert rows(spark, f"SELECT id FROM managed.{db}.orders WHERE dt = 'a' AND id > 10") == [(11,)]

    table = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.orders")
    assert (table.primary_key, table.partition_by) == (["id", "dt"], ["dt"])
    assert table.schema.field("note").metadata == {b"comment": b"free text"}
    assert table.options["log.consistency"] == "eventual"
    assert sorted(table.read().column("id").to_pylist()) == [1, 2, 11]
