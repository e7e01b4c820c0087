"""A table with deletion vectors (filestore/deletion.py) read by Spark: its plain splits go to the JVM raw
(tablestore/spark/read.py step 4: every file of the split and its vector), and Spark's Parquet reader reads the files
minus the rows their vectors delete (jvm/read/DeletedRows.java), by the rows' own positions in their files even when
the pushed filters skip row groups and pages; no merge. Against `Table.read()`, through SQL and
`format("managed")`, whole, by key range, by a value filter, with columns pruned. The jar's vector decoder
(jvm/mirror/DeletionVector.java) against the golden vectors Python's format is held to
(tests/data/golden/deletion_vectors.json)."""
from __future__ import annotations

import itertools
import os
import random
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pyspark
import pytest

import tablestore
from filestore import datafile
from tablestore.spark import jar
from tablestore.spark.read import _raw_splits

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = pa.schema([pa.field("k", pa.int64(), False), pa.field("p", pa.string(), False), ("v", pa.int64()),
                    ("note", pa.string()), ("x", pa.float64())])
COLUMNS = SCHEMA.names
_names = itertools.count()


def _plan(df: Any) -> str:
    return str(df._jdf.queryExecution().executedPlan().toString())


def _rows(table: pa.Table, columns: list[str] = COLUMNS) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in columns) for r in table.to_pylist()), key=repr)


def _got(df: Any, columns: list[str] = COLUMNS) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.select(*columns).collect()), key=repr)


@pytest.fixture
def small_row_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    """Data files of many row groups, each of many pages (with column indexes): the pushed filters then skip row
    groups and pages, and the rows read keep their own positions only if the reader tracks them."""
    monkeypatch.setattr(datafile, "ROW_GROUP_ROWS", 97)
    writer = pq.ParquetWriter

    def paged(schema: pa.Schema, sink: Any, compression: str) -> pq.ParquetWriter:
        return writer(sink, schema, compression=compression, write_statistics=True, use_dictionary=False,
                      write_page_index=True, max_rows_per_page=10)

    monkeypatch.setattr(datafile, "_parquet_writer", paged)


def _dv_table(warehouse: Path, seed: int, commits: int = 6) -> tablestore.Table:
    """A table with deletion vectors after `commits` commits of upserts and deletes (no compaction: several runs per
    bucket), keys in ranges that overlap from commit to commit."""
    catalog = tablestore.Catalog(str(warehouse))
    catalog.create_database("dvs", ignore_if_exists=True)
    table = catalog.create_table(f"dvs.t{next(_names)}", SCHEMA, primary_key=["k", "p"], partition_by=["p"],
                                 options={"bucket": "2", "write-only": "true", "deletion-vectors.enabled": "true",
                                          "log.system": "none"})
    rng = random.Random(seed)
    for commit in range(commits):
        changes: dict[tuple[int, str], dict[str, Any]] = {}
        for _ in range(rng.randint(300, 900)):
            k = (rng.randint(-2000, 2000), rng.choice(["x", "y"]))
            changes[k] = {"_row_kind": "-D" if rng.random() < 0.25 else "+U", "k": k[0], "p": k[1],
                          "v": rng.randint(-10**6, 10**6), "note": rng.choice([None, "n", "note é"]),
                          "x": rng.choice([None, rng.random()])}
        table.write(pa.Table.from_pylist(list(changes.values()),
                                         schema=pa.schema([("_row_kind", pa.string()), *SCHEMA])))
    return table


def _check_raw_plan(table: tablestore.Table) -> None:
    """Every split is raw, several of them of several runs, and some of their files carry vectors."""
    store = table._store
    splits = store.new_scan().plan(store.resolve_snapshot(None, None), None)
    assert all(s.plain for s in splits)
    assert any(len({f.level for f in s.files}) > 1 or len(s.files) > 1 for s in splits)
    raw, vectors, merged, rest = _raw_splits(store, SCHEMA, splits, False)
    assert len(raw) == len(splits) and not merged and not rest
    assert [len(files) for files in raw] == [len(s.files) for s in splits]
    assert any(v is not None for split in vectors for v in split)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_dv_table_reads_raw_in_the_jvm_as_the_python_reader_reads_it(
        spark: Any, spark_warehouse: Path, small_row_groups: None, seed: int) -> None:
    table = _dv_table(spark_warehouse, seed)
    _check_raw_plan(table)
    everything = table.read()
    assert everything.num_rows > 0

    sql = spark.table(f"managed.{table.name}")
    plan = _plan(sql)
    assert "raw splits, 0 merged in the JVM" in plan and "(0 raw splits" not in plan, plan
    assert _got(sql) == _rows(everything)
    managed = spark.read.format("managed").load(table.name)
    assert _got(managed) == _rows(everything)

    low, high = -700, 350
    key_range = (pc.field("k") >= low) & (pc.field("k") < high)
    expected = _rows(table.read(filter=key_range))
    assert _got(sql.filter((sql.k >= low) & (sql.k < high))) == expected
    assert _got(managed.filter((managed.k >= low) & (managed.k < high))) == expected

    on_value = (pc.field("v") > 200_000) & ~pc.field("note").is_null()
    expected = _rows(table.read(filter=on_value))
    assert _got(sql.filter("v > 200000 AND note IS NOT NULL")) == expected
    assert _got(managed.filter("v > 200000 AND note IS NOT NULL")) == expected

    # a point lookup (one row group, one page of one file) and a selective value filter
    k = everything.column("k")[everything.num_rows // 2].as_py()
    assert _got(sql.filter(sql.k == k)) == _rows(table.read(filter=pc.field("k") == k))
    assert _got(sql.filter("v < -900000")) == _rows(table.read(filter=pc.field("v") < -900_000))

    # columns pruned, with a filter on a column not read
    pruned = spark.sql(f"SELECT note, v FROM managed.{table.name} WHERE p = 'x' AND k > 0").collect()
    assert sorted((tuple(r) for r in pruned), key=repr) == _rows(
        table.read(filter=(pc.field("p") == "x") & (pc.field("k") > 0)), ["note", "v"])
    assert spark.sql(f"SELECT count(*) FROM managed.{table.name}").collect()[0][0] == everything.num_rows


def test_a_dv_table_at_an_older_snapshot_reads_its_own_vectors(spark: Any, spark_warehouse: Path) -> None:
    table = _dv_table(spark_warehouse, 3, commits=4)
    older = table.latest_snapshot_id() - 2   # type: ignore[operator]
    got = spark.read.format("managed").option("snapshot-id", str(older)).load(table.name)
    assert _got(got) == _rows(table.read(snapshot_id=older))


def test_a_corrupt_vector_fails_the_read_naming_the_vector_and_the_data_file(
        spark: Any, spark_warehouse: Path) -> None:
    table = _dv_table(spark_warehouse, 4, commits=3)
    store = table._store
    splits = store.new_scan().plan(store.resolve_snapshot(None, None), None)
    ref = next(f.deletion_vector for s in splits for f in s.files if f.deletion_vector is not None)
    path = Path(store.paths.root) / ref.path
    data = bytearray(path.read_bytes())
    data[ref.offset + 4 + ref.size // 2] ^= 0xFF   # a byte of the vector: its CRC no longer matches
    path.write_bytes(bytes(data))
    with pytest.raises(Exception) as failed:
        spark.table(f"managed.{table.name}").collect()
    message = str(failed.value)
    assert "CRC-32 mismatch" in message and path.name in message and ".parquet" in message, message


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    assert found, "no java (JAVA_HOME or the PATH)"
    return found


@pytest.mark.version_independent
def test_the_jar_s_vector_decoder_reads_the_golden_vectors(tmp_path: Path) -> None:
    classpath = os.pathsep.join([str(jar.jar_path()), str(Path(pyspark.__file__).parent / "jars" / "*")])
    classes = tmp_path / "classes"
    compiled = subprocess.run([jar._javac(), "-nowarn", "-d", str(classes), "-cp", classpath,
                               str(ROOT / "tests" / "java" / "GoldenDeletionVectors.java")],
                              capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stderr
    run = subprocess.run([_java(), "-cp", os.pathsep.join([str(classes), classpath]),
                          "tablestore.spark.jvm.mirror.GoldenDeletionVectors",
                          str(ROOT / "tests" / "data" / "golden" / "deletion_vectors.json")],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().endswith("11 cases, 0 failures"), run.stdout


def test_spark_writes_into_a_dv_table_set_its_vectors(spark: Any, spark_warehouse: Path) -> None:
    """The vectors are set by the commit, whoever wrote the files: the DataFrame write (JVM tasks), SQL's UPDATE,
    MERGE and DELETE all leave a table whose plain scan (every file minus its vector) is the table."""
    catalog = tablestore.Catalog(str(spark_warehouse))
    catalog.create_database("dvs", ignore_if_exists=True)
    name = f"dvs.w{next(_names)}"
    table = catalog.create_table(name, SCHEMA, primary_key=["k", "p"], partition_by=["p"], options={
        "bucket": "2", "write-only": "true", "deletion-vectors.enabled": "true", "log.system": "none"})
    first = [(k, "x", k, "a", 1.0) for k in range(200)]
    spark.createDataFrame(first, "k long, p string, v long, note string, x double").write.format(
        "managed").mode("append").save(name)
    second = [(k, "x", -k, "b", 2.0) for k in range(0, 200, 2)]
    spark.createDataFrame(second, "k long, p string, v long, note string, x double").write.format(
        "managed").mode("append").save(name)
    spark.sql(f"UPDATE managed.{name} SET note = 'u' WHERE k % 3 = 0")
    spark.sql(f"DELETE FROM managed.{name} WHERE k IN ({', '.join(str(k) for k in range(0, 200, 5))})")
    spark.createDataFrame([(7, "x", 70), (1000, "x", 1)], "k long, p string, v long").createOrReplaceTempView("src")
    spark.sql(f"MERGE INTO managed.{name} t USING src s ON t.k = s.k AND t.p = s.p "
              "WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT (k, p, v) VALUES (s.k, s.p, s.v)")
    want: dict[int, tuple[Any, ...]] = {}
    for k, p, v, note, x in first + second:
        want[k] = (k, p, v, note, x)
    want = {k: (r[0], r[1], r[2], "u" if k % 3 == 0 else r[3], r[4]) for k, r in want.items() if k % 5}
    want[7] = (7, "x", 70, *want[7][3:])
    want[1000] = (1000, "x", 1, None, None)
    assert _rows(table.read()) == sorted(want.values(), key=repr)
    assert _got(spark.table(f"managed.{name}")) == sorted(want.values(), key=repr)
    assert sum(int(f["deleted_row_count"]) for f in table.files()) > 0  # type: ignore[call-overload]
    _check_raw_plan(table)
