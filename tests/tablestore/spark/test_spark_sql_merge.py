"""MERGE INTO and UPDATE on managed tables (the SQL extension's rewrite, catalog/RowLevelRewrite.java), from PySpark
(the session of conftest, one database per test) and once from `tablestore sql`: every clause kind against a dict
replay of Spark's MERGE semantics, the errors (a target row matched twice, an ON condition that does not bind the
key, an update of a key column), the changelog the log gets, and a concurrent commit between a statement's read and
its commit (the statement fails, nothing of it is committed, a re-run succeeds)."""
from __future__ import annotations

import itertools
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

import tablestore

pytestmark = pytest.mark.spark

_names = itertools.count()
Row = dict[str, Any]
Key = tuple[Any, ...]


@pytest.fixture
def db(spark: Any) -> Iterator[str]:
    name = f"mergedb{next(_names)}"
    spark.sql(f"CREATE DATABASE managed.{name}")
    yield name
    spark.sql(f"DROP DATABASE IF EXISTS managed.{name} CASCADE")


def rows(spark: Any, sql: str) -> list[Row]:
    return [r.asDict(recursive=True) for r in spark.sql(sql).collect()]


def table_rows(spark: Any, table: str) -> dict[Key, Row]:
    return {(r["id"], r["dt"]): r for r in rows(spark, f"SELECT * FROM managed.{table}")}


def error_of(spark: Any, sql: str) -> str:
    with pytest.raises(Exception) as info:
        spark.sql(sql).collect()
    return str(info.value)


def snapshot_count(warehouse: Path, table: str) -> int:
    return len(tablestore.Catalog(str(warehouse)).get_table(table).snapshots())


T = """CREATE TABLE managed.{table} (id BIGINT NOT NULL, dt STRING NOT NULL, v STRING, n INT,
  PRIMARY KEY (id, dt) NOT ENFORCED) PARTITIONED BY (dt) TBLPROPERTIES ('bucket' = '2')"""

MERGE = """MERGE INTO managed.{table} t USING src s ON t.id = s.id AND t.dt = s.dt
WHEN MATCHED AND s.op = 'd' THEN DELETE
WHEN MATCHED AND t.n > 50 THEN UPDATE SET n = t.n + s.n, v = concat(t.v, '+', s.v)
WHEN MATCHED AND s.op = 'keep' THEN UPDATE SET v = t.v
WHEN MATCHED AND s.op <> 'noop' THEN UPDATE SET *
WHEN NOT MATCHED AND s.op = 'skip' THEN INSERT (id, dt, v, n) VALUES (-1, 'never', 'x', 0)
WHEN NOT MATCHED AND s.n % 2 = 0 THEN INSERT (id, dt, v) VALUES (s.id, s.dt, 'even')
WHEN NOT MATCHED THEN INSERT *
WHEN NOT MATCHED BY SOURCE AND t.n < 10 THEN DELETE
WHEN NOT MATCHED BY SOURCE AND t.n < 20 THEN UPDATE SET v = 'stale', n = t.n + 1000"""


def replay(target: dict[Key, Row], source: list[Row]) -> dict[Key, Row]:
    """MERGE above, by Spark's semantics: per source row the first WHEN [NOT] MATCHED clause that holds, per target
    row no source row matched the first WHEN NOT MATCHED BY SOURCE clause that holds."""
    out = {k: dict(r) for k, r in target.items()}
    matched: set[Key] = set()
    for s in source:
        k = (s["id"], s["dt"])
        if k in target:
            matched.add(k)
            t = target[k]
            if s["op"] == "d":
                del out[k]
            elif t["n"] is not None and t["n"] > 50:
                out[k] = {**t, "n": None if s["n"] is None else t["n"] + s["n"], "v": f"{t['v']}+{s['v']}"}
            elif s["op"] == "keep":
                pass
            elif s["op"] != "noop":
                out[k] = {c: s[c] for c in ("id", "dt", "v", "n")}
        elif s["op"] == "skip":
            out[(-1, "never")] = {"id": -1, "dt": "never", "v": "x", "n": 0}
        elif s["n"] is not None and s["n"] % 2 == 0:
            out[k] = {"id": s["id"], "dt": s["dt"], "v": "even", "n": None}
        else:
            out[k] = {c: s[c] for c in ("id", "dt", "v", "n")}
    for k, t in target.items():
        if k in matched or t["n"] is None:
            continue
        if t["n"] < 10:
            del out[k]
        elif t["n"] < 20:
            out[k] = {**t, "v": "stale", "n": t["n"] + 1000}
    return out


def source_rows(rng: random.Random, ids: range) -> list[Row]:
    out = []
    for i in rng.sample(list(ids), len(ids) // 2):
        op = rng.choice(["d", "u", "u", "keep", "noop", "i"] + (["skip"] if i % 17 == 0 else []))
        out.append({"id": i, "dt": rng.choice(["a", "b"]), "v": f"s{i}", "n": rng.choice([None, *range(100)]),
                    "op": op})
    return [dict(r) for r in {(r["id"], r["dt"]): r for r in out}.values()]


def test_merge_with_every_clause_kind_matches_a_dict_replay(spark: Any, db: str, spark_warehouse: Path) -> None:
    table = f"{db}.t"
    spark.sql(T.format(table=table))
    rng = random.Random(23)
    start = [{"id": i, "dt": rng.choice(["a", "b"]), "v": f"t{i}", "n": rng.choice([None, *range(100)])}
             for i in range(60)]
    spark.createDataFrame(start, "id BIGINT, dt STRING, v STRING, n INT").writeTo(f"managed.{table}").append()
    expected = table_rows(spark, table)
    for round_ in range(3):
        source = source_rows(rng, range(30 * round_, 30 * round_ + 60))
        spark.createDataFrame(source, "id BIGINT, dt STRING, v STRING, n INT, op STRING") \
            .createOrReplaceTempView("src")
        before = snapshot_count(spark_warehouse, table)
        spark.sql(MERGE.format(table=table))
        expected = replay(expected, source)
        assert table_rows(spark, table) == expected, f"round {round_}"
        assert snapshot_count(spark_warehouse, table) == before + 1   # one snapshot per statement


def test_merge_insert_values_update_set_star_and_matched_only(spark: Any, db: str) -> None:
    spark.sql(f"CREATE TABLE managed.{db}.k (id INT NOT NULL, v STRING, w DOUBLE, PRIMARY KEY (id) NOT ENFORCED)")
    spark.sql(f"INSERT INTO managed.{db}.k VALUES (1, 'a', 1.0), (2, 'b', 2.0)")
    spark.sql("SELECT * FROM VALUES (1L, 'A', 10), (3L, 'C', 30) AS s(key, v, w)").createOrReplaceTempView("s1")
    spark.sql(f"MERGE INTO managed.{db}.k t USING s1 ON t.id = s1.key "   # a wider key type: cast by Spark
              "WHEN MATCHED THEN UPDATE SET w = s1.w * 2 "
              "WHEN NOT MATCHED THEN INSERT (v, id) VALUES (upper(s1.v || 'x'), s1.key)")
    assert rows(spark, f"SELECT * FROM managed.{db}.k ORDER BY id") == [
        {"id": 1, "v": "a", "w": 20.0}, {"id": 2, "v": "b", "w": 2.0}, {"id": 3, "v": "CX", "w": None}]
    spark.sql("SELECT * FROM VALUES (2, 'B', 0.5), (9, 'Z', 9.0) AS s(id, v, w)").createOrReplaceTempView("s2")
    spark.sql(f"MERGE INTO managed.{db}.k USING s2 ON k.id = s2.id WHEN MATCHED THEN UPDATE SET *")   # inner join
    assert rows(spark, f"SELECT * FROM managed.{db}.k ORDER BY id") == [
        {"id": 1, "v": "a", "w": 20.0}, {"id": 2, "v": "B", "w": 0.5}, {"id": 3, "v": "CX", "w": None}]


def test_a_target_row_matched_twice_is_an_error_naming_the_key(spark: Any, db: str, spark_warehouse: Path) -> None:
    table = f"{db}.t"
    spark.sql(T.format(table=table))
    spark.sql(f"INSERT INTO managed.{table} VALUES (1, 'a', 'x', 1), (2, 'b', 'y', 2)")
    spark.sql("SELECT * FROM VALUES (2L, 'b', 'p', 1), (2L, 'b', 'q', 2), (7L, 'a', 'r', 3), (7L, 'a', 's', 4) "
              "AS s(id, dt, v, n)").createOrReplaceTempView("dup")
    before = snapshot_count(spark_warehouse, table)
    message = error_of(spark, f"MERGE INTO managed.{table} t USING dup s ON t.id = s.id AND t.dt = s.dt "
                              "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert "the target row with key id=2, dt=b is matched by more than one source row" in message
    assert snapshot_count(spark_warehouse, table) == before
    # unmatched duplicates are inserted (Spark's rule); without a WHEN MATCHED clause there is nothing to check
    spark.sql(f"MERGE INTO managed.{table} t USING dup s ON t.id = s.id AND t.dt = s.dt "
              "WHEN NOT MATCHED THEN INSERT *")
    assert sorted(table_rows(spark, table)) == [(1, "a"), (2, "b"), (7, "a")]


@pytest.mark.parametrize("on, why", [
    ("t.id = s.id", "it does not bind dt"),
    ("t.id = s.id AND t.dt = s.dt AND t.v = s.v", "(t.v = s.v) is not such an equality"),
    ("t.id = s.id AND t.dt > s.dt", "(t.dt > s.dt) is not such an equality"),
    ("t.id = s.id OR t.dt = s.dt", "is not such an equality"),
    ("t.id = t.n AND t.dt = s.dt", "is not such an equality"),
])
def test_an_on_condition_that_does_not_bind_the_whole_key_is_refused(spark: Any, db: str, on: str,
                                                                     why: str) -> None:
    spark.sql(T.format(table=f"{db}.t"))
    spark.sql("SELECT 1L AS id, 'a' AS dt, 'v' AS v, 1 AS n").createOrReplaceTempView("one")
    message = error_of(spark, f"MERGE INTO managed.{db}.t t USING one s ON {on} WHEN MATCHED THEN DELETE")
    assert "must bind the whole primary key (id, dt)" in message and why in message
    assert "\n\tat " not in message.split("JVM stacktrace")[0]


def test_update_sets_columns_and_refuses_a_key_column(spark: Any, db: str, spark_warehouse: Path) -> None:
    table = f"{db}.t"
    spark.sql(T.format(table=table))
    spark.sql(f"INSERT INTO managed.{table} VALUES (1, 'a', 'x', 1), (2, 'b', 'y', 2), (3, 'a', 'z', 3)")
    before = snapshot_count(spark_warehouse, table)
    spark.sql(f"UPDATE managed.{table} SET n = n * 10, v = upper(v) WHERE dt = 'a'")
    assert snapshot_count(spark_warehouse, table) == before + 1
    assert table_rows(spark, table) == {
        (1, "a"): {"id": 1, "dt": "a", "v": "X", "n": 10}, (2, "b"): {"id": 2, "dt": "b", "v": "y", "n": 2},
        (3, "a"): {"id": 3, "dt": "a", "v": "Z", "n": 30}}
    spark.sql(f"UPDATE managed.{table} SET id = id, v = 'all'")   # a key set to itself is no key change
    assert {r["v"] for r in table_rows(spark, table).values()} == {"all"}
    for sql in (f"UPDATE managed.{table} SET id = id + 1 WHERE n = 2",
                f"UPDATE managed.{table} SET dt = 'c'"):
        message = error_of(spark, sql)
        assert "sets the primary-key column" in message and "is a delete and an insert" in message
    message = error_of(spark, f"MERGE INTO managed.{table} t USING (SELECT 1L AS id, 'a' AS dt) s "
                              "ON t.id = s.id AND t.dt = s.dt WHEN MATCHED THEN UPDATE SET id = s.id + 1")
    assert "sets the primary-key column id" in message
    spark.sql(f"CREATE TABLE managed.{db}.nokey (id BIGINT, v STRING)")
    assert "it has no primary key" in error_of(spark, f"UPDATE managed.{db}.nokey SET v = 'x'")
    spark.sql(f"CREATE TABLE managed.{db}.partial (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED) "
              "TBLPROPERTIES ('merge-engine' = 'partial-update')")
    message = error_of(spark, f"MERGE INTO managed.{db}.partial t USING (SELECT 1L AS id, 'x' AS v) s "
                              "ON t.id = s.id WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    assert "its merge-engine is partial-update" in message and "write the new rows with INSERT INTO" in message


@pytest.mark.kafka
@pytest.mark.parametrize("mode", ["auto", "all"])
def test_the_log_gets_the_changelog_of_merge_and_update(spark: Any, db: str, spark_warehouse: Path,
                                                        kafka_bootstrap: str, mode: str) -> None:
    """`auto` (upsert) stores no -U, readers rebuild it; `all` stores the old rows too (as the format writes a
    retraction: debezium-json's `d` with `before`), though the table's files keep no -U."""
    key = "spark.sql.catalog.managed.table-storage.log.properties.bootstrap.servers"
    spark.sql(f"SET `{key}` = `{kafka_bootstrap}`")
    try:
        spark.sql(T.format(table=f"{db}.logged").replace("'bucket' = '2'",
                                                         f"'bucket' = '2', 'log.changelog-mode' = '{mode}'"))
    finally:
        spark.conf.unset(key)
    spark.sql(f"INSERT INTO managed.{db}.logged VALUES (1, 'a', 'x', 1), (2, 'b', 'y', 2), (3, 'a', 'z', 3)")
    table = tablestore.Catalog(str(spark_warehouse)).get_table(f"{db}.logged")

    def changes_since(ms: int, normalize: bool = True) -> list[tuple[Any, ...]]:
        got = [r for b in table.read_changes(scan="from-timestamp", timestamp_ms=ms, timeout_s=1.0,
                                             normalize=normalize) for r in b.to_pylist()]
        return sorted((r["_row_kind"], r["id"], r["dt"], r["v"], r["n"]) for r in got)

    def signed(changes: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:   # a retraction (-) or an addition (+)
        return sorted((c[0][0], *c[1:]) for c in changes)

    time.sleep(0.05)
    merge_start = int(time.time() * 1000)
    spark.sql("SELECT * FROM VALUES (1L, 'a', 'X', 10), (2L, 'b', 'gone', 0), (4L, 'b', 'new', 4) "
              "AS s(id, dt, v, n)").createOrReplaceTempView("changes")
    spark.sql(f"MERGE INTO managed.{db}.logged t USING changes s ON t.id = s.id AND t.dt = s.dt "
              "WHEN MATCHED AND s.n = 0 THEN DELETE WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *")
    merged = [("-U", 1, "a", "x", 1), ("+U", 1, "a", "X", 10), ("-D", 2, "b", "y", 2), ("+I", 4, "b", "new", 4)]
    assert changes_since(merge_start) == sorted(merged)
    stored = signed(changes_since(merge_start, normalize=False))
    if mode == "all":   # the log as stored holds the old row of the update
        assert stored == signed(merged)
    else:   # upsert: no old row of an update is stored
        assert stored == signed([("+U", 1, "a", "X", 10), ("-D", 2, "b", "y", 2), ("+I", 4, "b", "new", 4)])
    time.sleep(0.05)
    update_start = int(time.time() * 1000)
    spark.sql(f"UPDATE managed.{db}.logged SET n = n + 1 WHERE id IN (3, 4)")
    updated = [("-U", 3, "a", "z", 3), ("+U", 3, "a", "z", 4), ("-U", 4, "b", "new", 4), ("+U", 4, "b", "new", 5)]
    assert changes_since(update_start) == sorted(updated)
    if mode == "all":
        assert signed(changes_since(update_start, normalize=False)) == signed(updated)


class Held:
    """A source whose rows wait, in the statement's own job (after its read was planned), until released: the
    window in which another commit lands between a statement's plan and its commit."""

    def __init__(self, spark: Any, tmp_path: Path, name: str) -> None:
        self.started, self.go = tmp_path / f"{name}.started", tmp_path / f"{name}.go"
        started, go = str(self.started), str(self.go)

        def hold(i: int) -> int:
            open(started, "a").close()
            deadline = time.time() + 120
            while not os.path.exists(go) and time.time() < deadline:
                time.sleep(0.05)
            return i

        spark.udf.register(f"hold_{name}", hold, "bigint")
        self.function = f"hold_{name}"

    def run_while_held(self, statement: Callable[[], Any], concurrent: Callable[[], Any]) -> BaseException | None:
        """Run `statement` in a thread, `concurrent` once its source rows are being read, then release them; the
        error `statement` raised (None if it succeeded)."""
        failure: list[BaseException] = []

        def target() -> None:
            try:
                statement()
            except BaseException as e:   # noqa: BLE001 - handed to the test
                failure.append(e)

        thread = threading.Thread(target=target)
        thread.start()
        deadline = time.time() + 120
        while not self.started.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert self.started.exists(), "the held statement never started reading its source"
        try:
            concurrent()
        finally:
            self.go.touch()
            thread.join(180)
        return failure[0] if failure else None


@pytest.mark.parametrize("concurrent", ["merge", "insert"])
def test_a_concurrent_commit_fails_the_statement_cleanly_and_a_rerun_succeeds(
        spark: Any, db: str, tmp_path: Path, spark_warehouse: Path, concurrent: str) -> None:
    table = f"{db}.c"
    spark.sql(f"CREATE TABLE managed.{table} (id BIGINT NOT NULL, n INT, PRIMARY KEY (id) NOT ENFORCED) "
              "TBLPROPERTIES ('bucket' = '1')")
    spark.sql(f"INSERT INTO managed.{table} VALUES (1, 0), (2, 0)")
    held = Held(spark, tmp_path, concurrent)
    spark.range(1, 3, numPartitions=1).selectExpr(f"{held.function}(id) AS id").createOrReplaceTempView("slow")
    merge = (f"MERGE INTO managed.{table} t USING slow s ON t.id = s.id "
             "WHEN MATCHED THEN UPDATE SET n = t.n + 1")
    other = (f"MERGE INTO managed.{table} t USING (SELECT 1L AS id) s ON t.id = s.id "
             "WHEN MATCHED THEN UPDATE SET n = t.n + 100" if concurrent == "merge"
             else f"INSERT INTO managed.{table} VALUES (2, 50), (3, 0)")
    before = snapshot_count(spark_warehouse, table)
    error = held.run_while_held(lambda: spark.sql(merge).collect(), lambda: spark.sql(other).collect())
    assert error is not None and "since snapshot 1, which this write's rows were read from" in str(error)
    assert "nothing was committed: run it again" in str(error)
    assert snapshot_count(spark_warehouse, table) == before + 1   # the concurrent commit only: no lost update
    after_other = {1: 100, 2: 0} if concurrent == "merge" else {1: 0, 2: 50, 3: 0}
    assert {r["id"]: r["n"] for r in rows(spark, f"SELECT * FROM managed.{table}")} == after_other
    spark.sql(merge)   # the re-run reads the latest snapshot (the source no longer waits)
    expected = {k: v + (1 if k in (1, 2) else 0) for k, v in after_other.items()}
    assert {r["id"]: r["n"] for r in rows(spark, f"SELECT * FROM managed.{table}")} == expected


def test_a_concurrent_commit_to_another_bucket_does_not_conflict(spark: Any, db: str, tmp_path: Path) -> None:
    table = f"{db}.b"
    spark.sql(f"CREATE TABLE managed.{table} (id BIGINT NOT NULL, p STRING NOT NULL, n INT, "
              "PRIMARY KEY (id, p) NOT ENFORCED) PARTITIONED BY (p) TBLPROPERTIES ('bucket' = '1')")
    spark.sql(f"INSERT INTO managed.{table} VALUES (1, 'x', 0), (1, 'y', 0)")
    held = Held(spark, tmp_path, "other_bucket")
    spark.range(1, 2, numPartitions=1).selectExpr(f"{held.function}(id) AS id", "'x' AS p") \
        .createOrReplaceTempView("slow_x")
    error = held.run_while_held(
        lambda: spark.sql(f"UPDATE managed.{table} SET n = n + 1 WHERE id IN (SELECT id FROM slow_x) "
                          "AND p = 'x'").collect(),
        lambda: spark.sql(f"INSERT INTO managed.{table} VALUES (1, 'y', 7)").collect())
    assert error is None
    assert {r["p"]: r["n"] for r in rows(spark, f"SELECT * FROM managed.{table}")} == {"x": 1, "y": 7}


def test_one_merge_in_the_sql_shell(tmp_path: Path) -> None:
    warehouse = str(tmp_path / "wh")
    script = tmp_path / "merge.sql"
    script.write_text("""
CREATE DATABASE managed.db;
CREATE TABLE managed.db.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id) NOT ENFORCED);
INSERT INTO managed.db.t VALUES (1, 'a'), (2, 'b');
MERGE INTO managed.db.t t USING (SELECT * FROM VALUES (2L, 'B'), (3L, 'C') AS s(id, v)) s ON t.id = s.id
  WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *;
UPDATE managed.db.t SET v = lower(v) || '!' WHERE id = 3;
SELECT concat('row:', id, ':', v) FROM managed.db.t ORDER BY id;
""")
    root = str(Path(__file__).resolve().parents[3])
    pythonpath = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": pythonpath}
    done = subprocess.run([sys.executable, "-m", "tablestore.cli", "sql", "--warehouse", warehouse, "-f", str(script)],
                          capture_output=True, text=True, timeout=540, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stdout.splitlines() if line.startswith("row:")] == [
        "row:1:a", "row:2:B", "row:3:c!"]
