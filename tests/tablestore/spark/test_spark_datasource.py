"""The `managed` data source against the Python API: Spark reads what Python reads (random tables, random pushed
filters), Python reads what Spark wrote (partitioned or not, primary key or not), time travel, write modes."""
from __future__ import annotations

import datetime as dt
import itertools
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tablestore
import tablestore.spark
from tablestore.spark.types import spark_schema


pytestmark = pytest.mark.spark

SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("name", pa.string()), ("v", pa.float64()),
                    pa.field("part", pa.string(), False)])
_tables = itertools.count()
PYSPARK_4_1 = tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 2)


def _new_table(warehouse: Path, pk: bool, partitioned: bool, buckets: int,
               schema: pa.Schema = SCHEMA) -> tablestore.Table:
    cat = tablestore.Catalog(str(warehouse))
    cat.create_database("db", ignore_if_exists=True)
    return cat.create_table(f"db.t{next(_tables)}", schema, primary_key=["id", "part"] if pk else None,
                            partition_by=["part"] if partitioned else None, options={"bucket": str(buckets)})


def _load(spark: Any, warehouse: Path, table: tablestore.Table, **options: str) -> Any:
    return spark.read.format("managed").option("warehouse", str(warehouse)).options(**options).load(table.name)


def _sorted(rows: list[Any]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=repr)


PROP_SCHEMA = pa.schema([*SCHEMA, ("day", pa.date32()), ("amount", pa.decimal128(9, 2)), ("flag", pa.bool_())])
rows_st = st.lists(st.tuples(st.integers(0, 12), st.sampled_from([None, "a1", "a2", "b1", "zz"]),
                             st.one_of(st.none(), st.floats(-2, 2, allow_nan=False)), st.sampled_from("xyz"),
                             st.one_of(st.none(), st.dates(dt.date(2024, 1, 1), dt.date(2024, 1, 9))),
                             st.one_of(st.none(), st.decimals(-5, 5, places=2)), st.one_of(st.none(), st.booleans())),
                   max_size=25)
atoms = st.sampled_from([
    "id > {k}", "id = {k}", "id <= {k}", "id IN ({k}, 3, 7)", "NOT (id IN ({k}, 2))", "id <=> {k}",
    "name = 'a1'", "name IS NULL", "name IS NOT NULL", "name LIKE 'a%'", "name <> 'zz'", "name > 'a2'",
    "part = 'x'", "part <> 'y'", "part IN ('x', 'z')", "v > 0.5", "v IS NULL", "(id = {k} OR part = 'y')",
    "id + 1 > {k}", "NOT (part = 'z')", "day >= DATE'2024-01-0{d}'", "day = DATE'2024-01-0{d}'",
    "amount > {k} - 6.5", "amount IN (1.00, -2.50)", "flag", "NOT flag", "flag IS NULL",
])
filters_st = st.lists(st.tuples(atoms, st.integers(0, 12)), min_size=1, max_size=3).map(
    lambda terms: " AND ".join(t.format(k=k, d=k % 9 + 1) for t, k in terms))


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pk=st.booleans(), partitioned=st.booleans(), buckets=st.integers(1, 3),
       batches=st.lists(rows_st, min_size=1, max_size=3), compact=st.booleans(), condition=filters_st)
def test_spark_reads_what_python_reads_with_any_pushed_filter(
        spark: Any, tmp_path_factory: pytest.TempPathFactory, pk: bool, partitioned: bool, buckets: int,
        batches: list[list[tuple[Any, ...]]], compact: bool, condition: str) -> None:
    warehouse = tmp_path_factory.mktemp("wh")
    table = _new_table(warehouse, pk, partitioned, buckets, PROP_SCHEMA)
    for batch in batches:   # several writes: several sorted runs per bucket (and updates of the same keys)
        table.write(pa.Table.from_pylist([dict(zip(PROP_SCHEMA.names, r)) for r in batch], schema=PROP_SCHEMA))
    if compact:   # one sorted run per bucket: read without a merge (raw-convertible splits)
        table.compact(full=True)
    everything = table.read()
    expected = spark.createDataFrame(everything.to_pylist(), spark_schema(PROP_SCHEMA)).filter(condition).collect()
    got = _load(spark, warehouse, table).filter(condition).collect()
    assert _sorted(got) == _sorted(expected), condition
    assert _sorted(_load(spark, warehouse, table).collect()) == _sorted([tuple(r.values())
                                                                         for r in everything.to_pylist()])


def test_splits_without_a_merge_are_read_by_spark_s_parquet_reader_with_the_same_rows(
        spark: Any, tmp_path: Path) -> None:
    table = _new_table(tmp_path, pk=True, partitioned=True, buckets=2, schema=PROP_SCHEMA)
    rows = [{"id": i, "name": f"n{i}", "v": i / 2, "part": "xy"[i % 2], "day": dt.date(2024, 1, 1 + i % 9),
             "amount": None, "flag": i % 3 == 0} for i in range(40)]
    table.write(pa.Table.from_pylist(rows, schema=PROP_SCHEMA))
    table.compact(full=True)

    def read() -> tuple[list[tuple[Any, ...]], str]:
        df = _load(spark, tmp_path, table)
        return _sorted(df.collect()), df._jdf.queryExecution().executedPlan().toString()

    got, plan = read()   # every split one sorted run: all read by Spark's vectorized Parquet reader (columnar)
    assert got == _sorted([tuple(r.values()) for r in table.read().to_pylist()])
    assert "ColumnarToRow" in plan, plan
    table.write(pa.Table.from_pylist([{"_row_kind": "-D", **rows[2]}, {"_row_kind": "+U", **rows[4], "name": "new"}]))
    got, plan = read()   # the splits that now need a merge go through Python, the others not: rows
    assert got == _sorted([tuple(r.values()) for r in table.read().to_pylist()])
    assert "ColumnarToRow" not in plan and len(got) == 39
    filtered = _load(spark, tmp_path, table).filter("id < 10").collect()   # raw splits by row group, the rest in Python
    assert _sorted(filtered) == [r for r in got if r[0] < 10]


def _scan_output(df: Any) -> list[str]:
    """The columns the plan's scan of the table puts out (`explain()`'s BatchScan line), without expression ids."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    line = next(line for line in plan.splitlines() if "BatchScan" in line)
    return re.findall(r"(\w+)#\d+", line.split("BatchScan", 1)[1].split("]", 1)[0])


def test_a_scan_reads_only_the_columns_spark_asks_for(spark: Any, tmp_path: Path) -> None:
    """Column pruning: the scan puts out the selected columns only, read from the raw splits' files column by
    column (Spark's Parquet reader) and projected from the splits that need a merge (Python's rows), with the same
    rows as the whole-row read; `_row_kind`, a filter on a column not selected and `count(*)` too."""
    table = _new_table(tmp_path, pk=True, partitioned=True, buckets=2, schema=PROP_SCHEMA)
    rows = [{"id": i, "name": f"n{i}", "v": i / 2, "part": "xy"[i % 2], "day": dt.date(2024, 1, 1 + i % 9),
             "amount": None, "flag": i % 3 == 0} for i in range(40)]
    table.write(pa.Table.from_pylist(rows, schema=PROP_SCHEMA))
    table.compact(full=True)

    def check(columnar: bool) -> None:
        whole = table.read().to_pylist()
        df = _load(spark, tmp_path, table).select("v", "id")
        assert _scan_output(df) == ["id", "v"]
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert ("ColumnarToRow" in plan) == columnar, plan
        assert _sorted(df.collect()) == _sorted([(r["v"], r["id"]) for r in whole])
        filtered = _load(spark, tmp_path, table).filter("flag AND v < 10").select("name")
        assert _sorted(filtered.collect()) == _sorted([(r["name"],) for r in whole if r["flag"] and r["v"] < 10])
        if not PYSPARK_4_1:   # 4.1 offers no metadata column through the data source
            kinds = _load(spark, tmp_path, table).select("day", "_row_kind")
            assert _scan_output(kinds) == ["day", "_row_kind"]
            assert _sorted(kinds.collect()) == _sorted([(r["day"], "+I") for r in whole])
        assert _load(spark, tmp_path, table).count() == len(whole)

    check(columnar=True)   # every split one sorted run: all raw
    table.write(pa.Table.from_pylist([{"_row_kind": "-D", **rows[2]}, {"_row_kind": "+U", **rows[4], "v": 99.0}]))
    check(columnar=False)  # the splits that now need a merge are Python's, projected


def test_pushed_filters_prune_partitions_and_leave_spark_s_plan(spark: Any, tmp_path: Path) -> None:
    table = _new_table(tmp_path, pk=True, partitioned=True, buckets=2)
    table.write(pa.Table.from_pylist([{"id": i, "name": f"n{i}", "v": 1.0, "part": "xyz"[i % 3]} for i in range(30)],
                                     schema=SCHEMA))
    df = _load(spark, tmp_path, table).filter("part = 'x' AND id > 20 AND v > 0.5")
    plan = df._jdf.queryExecution().executedPlan().toString()
    spark_filter = " ".join(line for line in plan.splitlines() if "Filter (" in line)
    # the partition filter leaves Spark's plan (only partition x's files are read); v and id stay: the raw splits
    # (Spark's Parquet reader) skip row groups by them and Spark filters the rows
    assert "v#" in spark_filter and "id#" in spark_filter and "part#" not in spark_filter
    assert df.rdd.getNumPartitions() == 2   # the splits of partition x only (2 buckets), not all 6
    assert sorted(r.id for r in df.collect()) == [21, 24, 27]


def test_python_reads_what_spark_wrote(spark: Any, tmp_path: Path) -> None:
    for pk, partitioned in itertools.product([True, False], [True, False]):
        table = _new_table(tmp_path, pk, partitioned, buckets=2)
        label = f"pk={pk} partitioned={partitioned}"
        first = [(i, f"n{i}", float(i), "xy"[i % 2]) for i in range(40)]
        df = spark.createDataFrame(first, spark_schema(SCHEMA)).repartition(3)
        df.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
        assert _sorted([tuple(r.values()) for r in table.read().to_pylist()]) == _sorted(first), label
        assert len(table.snapshots()) == 1, label    # one snapshot for the whole job

        # a changelog: update one row, delete another (the old row for a table without a primary key)
        changes = [("+U" if pk else "+I", 1, "changed", 1.0, "y"), ("-D", 2, "n2", 2.0, "x")]
        if not pk:
            changes.append(("-D", 1, "n1", 1.0, "y"))
        cdf = spark.createDataFrame(changes, "_row_kind string, id long, name string, v double, part string")
        cdf.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
        expected = {(r[0], r[3]): r for r in first}
        expected[(1, "y")] = (1, "changed", 1.0, "y")
        del expected[(2, "x")]
        rows = _sorted([tuple(r.values()) for r in table.read().to_pylist()])
        assert rows == _sorted(list(expected.values())), label

        # overwrite: dynamic replaces the partitions present, static the whole table
        new = spark.createDataFrame([(100, "new", 0.0, "x")], spark_schema(SCHEMA))
        new.write.format("managed").option("warehouse", str(tmp_path)).option("overwrite-mode", "dynamic") \
            .mode("overwrite").save(table.name)
        if partitioned:
            expected = {k: r for k, r in expected.items() if k[1] == "y"} | {(100, "x"): (100, "new", 0.0, "x")}
        else:
            expected = {(100, "x"): (100, "new", 0.0, "x")}
        assert _sorted([tuple(r.values()) for r in table.read().to_pylist()]) == _sorted(list(expected.values()))
        new.write.format("managed").option("warehouse", str(tmp_path)).mode("overwrite").save(table.name)
        assert table.read().num_rows == 1, label
        assert _load(spark, tmp_path, table).count() == 1


def _runs(table: tablestore.Table) -> list[tuple[str, int]]:
    return [(str(f["partition"]), int(f["bucket"])) for f in table.files()]  # type: ignore[call-overload]


@pytest.mark.parametrize("partitioned,buckets", [(True, 3), (False, 3), (True, 1), (False, 1)])
def test_a_dataframe_write_has_one_writer_per_bucket_and_applies_a_key_s_rows_in_input_order(
        spark: Any, tmp_path: Path, partitioned: bool, buckets: int) -> None:
    """Every key's rows come through each of 4 input partitions: the write still leaves exactly one new file per
    bucket it writes (one writer per bucket, as SQL INSERT; a table of one bucket too), and each key ends with its
    last row in input order; a changelog's -D/+I of one key in different input partitions apply in input order."""
    table = _new_table(tmp_path, pk=True, partitioned=partitioned, buckets=buckets)
    rows = [(i % 7, f"r{i}", float(i), "xy"[i % 2] if partitioned else "x") for i in range(200)]
    df = spark.sparkContext.parallelize(rows, 4).toDF(spark_schema(SCHEMA))
    df.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
    runs = _runs(table)
    # without the distribution: 4 per bucket
    assert len(runs) == len(set(runs)) == buckets * (2 if partitioned else 1), runs
    expected = {(r[0], r[3]): r for r in rows}
    assert _sorted([tuple(r.values()) for r in table.read().to_pylist()]) == _sorted(list(expected.values()))

    key = rows[0][3]
    changes = [("-D", 0, "", 0.0, key), ("+I", 0, "back", 0.0, key),      # input partition 0: 0 deleted, then back
               ("+I", 1, "gone", 0.0, key), ("-D", 1, "", 0.0, key)]       # input partition 1: 1 back, then deleted
    changes += [("+U", k, f"u{k}", 1.0, key) for k in range(2, 7)]
    cdf = spark.sparkContext.parallelize(changes, 3).toDF("_row_kind string, id long, name string, v double, "
                                                          "part string")
    cdf.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
    new_runs = [r for r in _runs(table) if r not in runs]
    assert len(new_runs) == len(set(new_runs)), new_runs
    names = {(r["id"], r["part"]): r["name"] for r in table.read().to_pylist()}
    assert names[(0, key)] == "back" and (1, key) not in names and names[(2, key)] == "u2"


def test_a_key_of_another_type_than_the_table_s_is_written_as_python_casts_it(spark: Any, tmp_path: Path) -> None:
    """An int key into a bigint column: Spark cannot bucket the rows before Python casts them, so the write runs
    without the distribution (as before it had one) instead of failing."""
    table = _new_table(tmp_path, pk=True, partitioned=False, buckets=2)
    df = spark.sparkContext.parallelize([(i, f"n{i}", 0.0, "x") for i in range(20)], 2) \
        .toDF("id int, name string, v double, part string")
    df.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
    assert sorted(table.read().column("id").to_pylist()) == list(range(20))


def test_save_modes_that_create_a_table_are_refused(spark: Any, tmp_path: Path) -> None:
    table = _new_table(tmp_path, pk=True, partitioned=False, buckets=1)
    df = spark.createDataFrame([(1, "a", 0.0, "x")], spark_schema(SCHEMA))
    for mode in ("errorifexists", "ignore"):
        with pytest.raises(Exception, match="UNSUPPORTED_DATA_SOURCE_SAVE_MODE"):
            df.write.format("managed").option("warehouse", str(tmp_path)).mode(mode).save(table.name)
    assert table.snapshots() == []


def test_distribute_by_bucket_puts_each_bucket_in_one_task_in_input_order(spark: Any, tmp_path: Path) -> None:
    """The write clusters by bucket itself; `distribute_by_bucket` still orders each bucket's rows by their input
    position in one task before the write (what a cluster's shuffle, fetching from several executors, does not)."""
    from filestore import bucket_of

    table = _new_table(tmp_path, pk=True, partitioned=True, buckets=3)
    rows = [(i % 7, f"r{i}", float(i), "xy"[i % 2]) for i in range(200)]   # every key written many times
    df = spark.sparkContext.parallelize(rows, 4).toDF(spark_schema(SCHEMA))
    distributed = tablestore.spark.distribute_by_bucket(df, table.name, warehouse=str(tmp_path))
    tasks = distributed.rdd.glom().collect()
    keys = pa.table({"id": [r[0] for r in rows], "part": [r[3] for r in rows]})
    bucket = dict(zip([(r[0], r[3]) for r in rows], bucket_of(keys, ["id", "part"], 3).tolist()))
    where: dict[tuple[str, int], int] = {}
    for task, task_rows in enumerate(tasks):
        for r in task_rows:
            assert where.setdefault((r.part, bucket[(r.id, r.part)]), task) == task   # a bucket in one task
        positions = [int(r.name[1:]) for r in task_rows]
        assert positions == sorted(positions)   # in input order
    distributed.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
    runs = _runs(table)
    assert len(runs) == len(set(runs))   # one run per bucket
    expected = {(r[0], r[3]): r for r in rows}   # input order: the last row of a key wins
    assert _sorted([tuple(r.values()) for r in table.read().to_pylist()]) == _sorted(list(expected.values()))


def test_the_session_s_warehouse_is_the_default(spark: Any, spark_warehouse: Path, tmp_path: Path) -> None:
    """`tablestore.spark.session(warehouse=...)` (here through local_session): no warehouse option needed; the
    option wins over it."""
    tables = []
    for warehouse in (spark_warehouse, tmp_path):
        cat = tablestore.Catalog(str(warehouse))
        cat.create_database("session_db", ignore_if_exists=True)
        tables.append(cat.create_table("session_db.t", SCHEMA, primary_key=["id", "part"]))
    spark.createDataFrame([(1, "a", 0.0, "x")], spark_schema(SCHEMA)).write.format("managed").mode("append") \
        .save("session_db.t")
    assert spark.read.format("managed").load("session_db.t").count() == 1 == tables[0].read().num_rows
    assert tables[1].read().num_rows == 0
    tables[1].write(pa.Table.from_pylist([{"id": 1, "name": "b", "v": 0.0, "part": "x"}], schema=SCHEMA))
    assert _load(spark, tmp_path, tables[1]).collect()[0].name == "b"
    assert spark.conf.get("spark.sql.python.filterPushdown.enabled") == "true"


def test_a_failed_write_job_commits_nothing_and_removes_its_files(spark: Any, tmp_path: Path) -> None:
    table = _new_table(tmp_path, pk=True, partitioned=False, buckets=1)
    rows = [("+I", 1, "a", 0.0, "x"), ("+I", 2, "b", 0.0, "x"), ("+X", 3, "c", 0.0, "x")]
    df = spark.sparkContext.parallelize(rows, 3).toDF("_row_kind string, id long, name string, v double, part string")
    with pytest.raises(Exception, match=r"invalid _row_kind \['[+]X'\]"):
        df.write.format("managed").option("warehouse", str(tmp_path)).mode("append").save(table.name)
    assert table.snapshots() == []
    assert not [p for p in Path(table.path).rglob("*.parquet")]   # the finished tasks' files were aborted


def test_time_travel_by_snapshot_id_and_timestamp(spark: Any, tmp_path: Path) -> None:
    table = _new_table(tmp_path, pk=True, partitioned=False, buckets=1)
    first = table.write(pa.Table.from_pylist([{"id": 1, "name": "a", "v": 0.0, "part": "x"}], schema=SCHEMA))
    table.write(pa.Table.from_pylist([{"id": 2, "name": "b", "v": 0.0, "part": "x"}], schema=SCHEMA))
    at = next(s for s in table.snapshots() if s.id == first).time_millis
    assert _load(spark, tmp_path, table, **{"snapshot-id": str(first)}).count() == 1
    assert _load(spark, tmp_path, table, **{"timestamp-ms": str(at)}).count() == 1
    assert _load(spark, tmp_path, table).count() == 2


def test_clear_errors_for_a_missing_warehouse_and_bad_options(spark: Any, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    table = _new_table(tmp_path, pk=True, partitioned=False, buckets=1)
    with pytest.raises(Exception, match="snapshot-id"):
        _load(spark, tmp_path, table, **{"snapshot-id": "three"}).collect()
    df = spark.createDataFrame([(1, "a", 0.0, "x")], spark_schema(SCHEMA))
    with pytest.raises(Exception, match="overwrite-mode"):
        df.write.format("managed").option("warehouse", str(tmp_path)).option("overwrite-mode", "some") \
            .mode("overwrite").save(table.name)
    assert table.read().num_rows == 0


def test_timestamps_read_raw_by_spark_as_python_reads_them(spark: Any, tmp_path: Path) -> None:
    """Timestamps with a time zone (TIMESTAMP, of second to microsecond precision) and without (TIMESTAMP_NTZ, in
    microseconds) read by Spark's Parquet reader (raw splits, nothing in Python) as the Python path gives them, also
    before 1900 and with deletion vectors; a column Spark's reader would read as another type (nanoseconds, or
    milliseconds without a time zone) sends the table through Python, with the same rows."""
    utc = dt.timezone.utc

    def table_of(schema: pa.Schema, options: dict[str, str]) -> tablestore.Table:
        cat = tablestore.Catalog(str(tmp_path))
        cat.create_database("db", ignore_if_exists=True)
        return cat.create_table(f"db.t{next(_tables)}", schema, primary_key=["id"],
                                options={"bucket": "2", "log.system": "none", **options})

    times = [dt.datetime(1850, 3, 1, 12, 30, 15, 123456), dt.datetime(1970, 1, 1), dt.datetime(2024, 2, 29, 23, 59,
                                                                                               59, 999999),
             dt.datetime(2200, 4, 11, 23, 47, 16), None]
    base = pa.schema([pa.field("id", pa.int64(), False), ("at", pa.timestamp("us", tz="UTC")),
                      ("milli", pa.timestamp("ms", tz="UTC")), ("sec", pa.timestamp("s", tz="Europe/Paris")),
                      ("micro_ntz", pa.timestamp("us"))])

    def rows(schema: pa.Schema, version: int) -> pa.Table:
        data: dict[str, list[Any]] = {"id": list(range(len(times)))}
        for f in schema:
            if f.name != "id":
                data[f.name] = [None if t is None else (t.replace(tzinfo=utc) if f.type.tz else t).replace(
                    microsecond=0 if f.type.unit == "s" else (t.microsecond // 1000 * 1000 if f.type.unit == "ms"
                                                              else t.microsecond)) + dt.timedelta(days=version)
                                for t in times]
        return pa.table(data, schema=schema)

    for schema, options, raw in [(base, {}, True), (base, {"deletion-vectors.enabled": "true"}, True),
                                 (pa.schema([*base, ("nano", pa.timestamp("ns"))]), {}, False),
                                 (pa.schema([*base, ("local_milli", pa.timestamp("ms"))]), {}, False)]:
        table = table_of(schema, options)
        table.write(rows(schema, 0))
        table.write(rows(schema, 1).slice(0, 3))
        if not options:
            table.compact(full=True)
        df = _load(spark, tmp_path, table)
        plan = df._jdf.queryExecution().executedPlan().toString()
        assert ("(Python)" not in plan) == raw, plan
        micros = pa.schema([f.with_type(pa.timestamp("us", f.type.tz)) if pa.types.is_timestamp(f.type) else f
                            for f in schema])   # Python's datetime holds microseconds
        want = spark.createDataFrame(table.read().cast(micros).to_pylist(), spark_schema(schema)).collect()
        assert _sorted(df.collect()) == _sorted(want)
        assert _sorted(df.filter("id < 2").collect()) == [r for r in _sorted(want) if r[0] < 2]
