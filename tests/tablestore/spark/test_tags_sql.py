"""Tags in Spark SQL through the `managed` catalog: `CALL managed.sys.create_tag / delete_tag` (and `system.`),
`` db.`t$tags` `` and `VERSION AS OF 'tag'`, across snapshot expiry; `DROP TABLE` takes the tags with it."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.errors import AnalysisException

import tablestore

pytestmark = pytest.mark.spark


def rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in spark.sql(sql).collect()]


def test_tags_in_sql_survive_expiry_and_drop_with_the_table(spark: Any, spark_warehouse: Path) -> None:
    db = f"tagdb_{int(time.time() * 1000) % 100000}"
    spark.sql(f"CREATE DATABASE managed.{db}")
    try:
        spark.sql(f"CREATE TABLE managed.{db}.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED) "
                  "TBLPROPERTIES ('log.system' = 'none')")
        spark.sql(f"INSERT INTO managed.{db}.t VALUES (1, 'a'), (2, 'b')")
        spark.sql(f"INSERT INTO managed.{db}.t VALUES (2, 'B'), (3, 'c')")
        [created] = rows(spark, f"CALL managed.sys.create_tag(table => '{db}.t', tag => 'v1', snapshot => 1)")
        assert created[:2] == ("v1", 1) and created[4] == 2
        rows(spark, f"CALL managed.system.create_tag(table => '{db}.t', tag => 'v2')")
        tags = rows(spark, f"SELECT tag_name, snapshot_id, record_count FROM managed.{db}.`t$tags`")
        assert tags == [("v1", 1, 2), ("v2", 2, 4)]

        spark.sql(f"INSERT OVERWRITE managed.{db}.t VALUES (9, 'z')")
        spark.sql(f"CALL managed.system.expire_snapshots(table => '{db}.t', retain_last => 1)")
        assert rows(spark, f"SELECT id, v FROM managed.{db}.t VERSION AS OF 'v1' ORDER BY id") == [(1, "a"), (2, "b")]
        assert rows(spark, f"SELECT id, v FROM managed.{db}.t VERSION AS OF 'v2' ORDER BY id") == [
            (1, "a"), (2, "B"), (3, "c")]
        assert rows(spark, f"SELECT id FROM managed.{db}.t") == [(9,)]
        with pytest.raises(AnalysisException) as caught:
            spark.sql(f"SELECT * FROM managed.{db}.t VERSION AS OF 'nope'").collect()
        assert f"table '{db}.t': tag 'nope' does not exist (its tags: v1, v2)" in str(caught.value)

        assert rows(spark, f"CALL managed.sys.delete_tag(table => '{db}.t', tag => 'v1')") == [("v1", True)]
        assert rows(spark, f"SELECT tag_name FROM managed.{db}.`t$tags`") == [("v2",)]
        path = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.t").path
        assert (Path(path) / "tag" / "tag-v2").exists()
        spark.sql(f"DROP TABLE managed.{db}.t")
        assert not Path(path).exists()
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS managed.{db} CASCADE")
