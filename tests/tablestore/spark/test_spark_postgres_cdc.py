"""A real database at the source: PostgreSQL (the project's development server), Debezium's PostgreSQL connector in a
real Kafka Connect worker, the project's broker and real Spark. The oracle is Postgres itself (SELECT), not a
generator: every type Debezium sends in its modes, TOAST under both replica identities, TRUNCATE, schema changes while
the job runs, the initial snapshot, a whole database in one job with a table added and the job killed."""
from __future__ import annotations

import base64
import datetime as dt
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pg_source
import tablestore
from pg_source import P, Source, interval_micros, micros_of_day, utc_time, wait_for
from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob
from tablestore.spark.ingest import IngestConfig, IngestJob

pytest.importorskip("psycopg")
pytestmark = [pytest.mark.spark, pytest.mark.kafka, pytest.mark.version_independent]
ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def pg() -> Iterator[Any]:
    with pg_source.server() as server:
        yield server


@pytest.fixture(scope="module")
def worker_and_dir(kafka_bootstrap: str) -> Iterator[Any]:
    with pg_source.worker(kafka_bootstrap) as (w, rdir):
        yield w, rdir


@pytest.fixture
def source(pg: Any, worker_and_dir: Any) -> Iterator[Source]:
    s = Source(pg, worker_and_dir[0])
    yield s
    s.close()


def _sync(spark: Any, warehouse: Path, bootstrap: str, pattern: str, **kwargs: Any) -> DatabaseIngestJob:
    config = DatabaseIngestConfig(database="src", topic_pattern=pattern, bootstrap_servers=bootstrap,
                                  warehouse=str(warehouse), create=True, table_options={"bucket": "2"},
                                  catalog_options={"log.properties.bootstrap.servers": bootstrap}, **kwargs)
    return DatabaseIngestJob(spark, config)


def _table(warehouse: Path, name: str) -> tablestore.Table:
    return tablestore.Catalog(str(warehouse)).get_table(name)


def _read(warehouse: Path, name: str, key: str = "id") -> list[dict[str, Any]]:
    return sorted(_table(warehouse, name).read().to_pylist(), key=lambda r: r[key])


def _same(warehouse: Path, name: str, expected: list[dict[str, Any]], key: str = "id") -> bool:
    cat = tablestore.Catalog(str(warehouse))
    if not cat.table_exists(name):
        return False
    got = [{k: r.get(k) for k in (expected[0] if expected else {})} for r in _read(warehouse, name, key)]
    return got == expected


# -- 1. every type, in each of Debezium's modes ------------------------------------------------------------------
TYPES_DDL = """CREATE TABLE {name} (
  id integer PRIMARY KEY, c_smallint smallint, c_integer integer, c_bigint bigint, c_numeric numeric(10,2),
  c_numeric_free numeric, c_real real, c_double double precision, c_bool boolean, c_char char(5),
  c_varchar varchar(20), c_text text, c_bytea bytea, c_date date, c_time time, c_timetz timetz, c_ts3 timestamp(3),
  c_ts6 timestamp(6), c_tstz timestamptz, c_interval interval, c_uuid uuid, c_json json, c_jsonb jsonb,
  c_enum mood, c_intarr int[], c_textarr text[])"""
TYPES_ROWS = """INSERT INTO {name} VALUES
 (1, -32768, 2147483647, 9223372036854775807, 12345678.91, 3.14159265358979323846264338327950288, 3.25,
  2.718281828459045, true, 'ab', 'vc', 'hello', '\\xdeadbeef', '2024-02-29', '13:45:30.123456', '13:45:30.5+02',
  '2024-01-01 10:11:12.345', '2024-01-01 10:11:12.345678', '2024-06-01 12:00:00.123456+02',
  '1 year 2 mons 3 days 04:05:06.789', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{{"a": [1, 2]}}',
  '{{"b": {{"c": null}}}}', 'happy', '{{1,2,NULL}}', '{{"x","y z",NULL}}'),
 (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
  NULL, NULL, NULL, NULL, NULL, NULL),
 (3, 0, -1, -9223372036854775808, -0.01, -1e-20, 'NaN', '-Infinity', false, 'abcde', '', '', '', '0001-01-01',
  '00:00:00', '23:59:59.999999-12', '1970-01-01 00:00:00', '1900-12-31 23:59:59.999999',
  '2262-04-11 23:47:16.854775+00', '-3 days 00:00:01.5', '00000000-0000-0000-0000-000000000000', '[]', '{{}}', 'sad',
  '{{}}', '{{}}')"""
ORACLE = """SELECT id, c_smallint, c_integer, c_bigint, c_numeric, c_numeric::text AS numeric_text,
  c_numeric_free::text AS numeric_free_text, c_numeric_free::float8 AS numeric_free_double, c_real, c_double, c_bool,
  c_char, c_varchar, c_text, c_bytea, c_date, c_time, c_timetz, c_ts3, c_ts6, c_tstz,
  (EXTRACT(YEAR FROM c_interval) * 12 + EXTRACT(MONTH FROM c_interval))::int AS i_months,
  EXTRACT(DAY FROM c_interval)::int AS i_days,
  EXTRACT(EPOCH FROM c_interval - date_trunc('day', c_interval)) AS i_seconds,
  c_uuid::text AS c_uuid, c_json::text AS c_json, c_jsonb::text AS c_jsonb, c_enum::text AS c_enum, c_intarr,
  c_textarr FROM {name} ORDER BY id"""


def _expected(pg_row: dict[str, Any], mode: str) -> dict[str, Any]:
    """A Postgres row as the managed table holds it, per the documented mapping and `mode` (default: precise,
    adaptive, bytes; text: string, connect, base64; double: double, adaptive_time_microseconds, hex)."""
    r = dict(pg_row)
    out = {k: r[k] for k in ("id", "c_smallint", "c_integer", "c_bigint", "c_real", "c_double", "c_bool", "c_char",
                             "c_varchar", "c_text", "c_date", "c_uuid", "c_json", "c_jsonb", "c_enum", "c_intarr",
                             "c_textarr")}
    raw = None if r["c_bytea"] is None else bytes(r["c_bytea"])
    out["c_bytea"] = raw if mode == "default" or raw is None else (
        base64.b64encode(raw).decode() if mode == "text" else raw.hex())
    out["c_numeric"] = {"default": r["c_numeric"], "text": r["numeric_text"],
                        "double": None if r["c_numeric"] is None else float(r["c_numeric"])}[mode]
    out["c_numeric_free"] = r["numeric_free_double"] if mode == "double" else r["numeric_free_text"]
    out["c_time"] = None if r["c_time"] is None else micros_of_day(r["c_time"])
    out["c_timetz"] = None if r["c_timetz"] is None else utc_time(r["c_timetz"])
    out["c_ts3"], out["c_ts6"] = r["c_ts3"], r["c_ts6"]
    if mode == "text" and r["c_ts6"] is not None:   # connect: milliseconds (floored)
        out["c_time"] = out["c_time"] // 1000 * 1000
        epoch = dt.datetime(1970, 1, 1)
        out["c_ts6"] = epoch + dt.timedelta(milliseconds=(r["c_ts6"] - epoch) // dt.timedelta(milliseconds=1))
    out["c_tstz"] = None if r["c_tstz"] is None else r["c_tstz"].astimezone(dt.timezone.utc)
    out["c_interval"] = None if r["i_months"] is None else interval_micros(r["i_months"], r["i_days"], r["i_seconds"])
    return out


def _equal(got: dict[str, Any], want: dict[str, Any]) -> bool:
    for k, w in want.items():
        g = got.get(k)
        if isinstance(w, float) and isinstance(g, float) and (math.isnan(w) and math.isnan(g)):
            continue
        if isinstance(w, float) and isinstance(g, float) and not math.isclose(g, w, rel_tol=1e-6):
            return False
        if isinstance(g, dt.datetime) and isinstance(w, dt.datetime) and g.tzinfo and w.tzinfo:
            if g != w:
                return False
            continue
        if not isinstance(w, float) and g != w:
            return False
    return True


def test_every_postgres_type_in_every_debezium_mode_reads_back_as_postgres_has_it(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, source: Source) -> None:
    """Debezium's defaults (precise decimals, adaptive times, bytes), `decimal.handling.mode=string`
    `time.precision.mode=connect` `binary.handling.mode=base64`, and `double` `adaptive_time_microseconds` `hex`,
    each into a table `--create` makes; the defaults also into a table that exists already."""
    source.sql("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    for name in ("types_default", "types_text", "types_double", "types_existing"):
        source.sql(TYPES_DDL.format(name=name), TYPES_ROWS.format(name=name))
    wh = tmp_path / "wh"
    cat = tablestore.Catalog(str(wh))
    cat.create_database("src")
    import pyarrow as pa   # the existing table: the types docs/cdc.md gives for each PostgreSQL type
    existing = pa.schema([pa.field("id", pa.int32(), False), ("c_smallint", pa.int16()), ("c_integer", pa.int32()),
                          ("c_bigint", pa.int64()), ("c_numeric", pa.decimal128(10, 2)), ("c_numeric_free", pa.string()),
                          ("c_real", pa.float32()), ("c_double", pa.float64()), ("c_bool", pa.bool_()),
                          ("c_char", pa.string()), ("c_varchar", pa.string()), ("c_text", pa.string()),
                          ("c_bytea", pa.binary()), ("c_date", pa.date32()), ("c_time", pa.int64()),
                          ("c_timetz", pa.string()), ("c_ts3", pa.timestamp("us")), ("c_ts6", pa.timestamp("us")),
                          ("c_tstz", pa.timestamp("us", "UTC")), ("c_interval", pa.int64()), ("c_uuid", pa.string()),
                          ("c_json", pa.string()), ("c_jsonb", pa.string()), ("c_enum", pa.string()),
                          ("c_intarr", pa.list_(pa.int32())), ("c_textarr", pa.list_(pa.string()))])
    cat.create_table("src.types_existing", schema=existing, primary_key=["id"])
    prefixes = [source.capture(["public.types_default", "public.types_existing"]),
                source.capture(["public.types_text"], decimal_handling_mode="string", time_precision_mode="connect",
                               binary_handling_mode="base64"),
                source.capture(["public.types_double"], decimal_handling_mode="double",
                               time_precision_mode="adaptive_time_microseconds", binary_handling_mode="hex")]
    pattern = "(" + "|".join(prefixes) + r")\.public\..*"
    wait_for(lambda: _topics_ready(kafka_bootstrap, prefixes), 90, "Debezium's snapshot topics")
    _sync(spark, wh, kafka_bootstrap, pattern, available_now=True).run()
    for table, mode in (("types_default", "default"), ("types_text", "text"), ("types_double", "double"),
                        ("types_existing", "default")):
        want = [_expected(r, mode) for r in source.rows(ORACLE.format(name=table))]
        got = _read(wh, f"src.{table}")
        assert len(got) == len(want), table
        for g, w in zip(got, want):
            assert _equal(g, w), (table, mode, {k: (g.get(k), v) for k, v in w.items() if g.get(k) != v})
    schema = _table(wh, "src.types_default").schema
    assert str(schema.field("c_numeric").type) == "decimal128(10, 2)"
    assert str(schema.field("c_numeric_free").type) == "string" and str(schema.field("c_tstz").type) == \
        "timestamp[us, tz=UTC]"


def _topics_ready(bootstrap: str, prefixes: list[str]) -> bool:
    from confluent_kafka.admin import AdminClient

    topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    return all(any(t.startswith(p + ".public.") for t in topics) for p in prefixes)


# -- 2. TOAST ----------------------------------------------------------------------------------------------------
def _toast_table(source: Source, name: str, identity: str) -> None:
    source.sql(f"CREATE TABLE {name} (id int PRIMARY KEY, vip boolean, big text, doc jsonb, tags text[])",
               f"ALTER TABLE {name} ALTER COLUMN big SET STORAGE EXTERNAL",
               f"ALTER TABLE {name} ALTER COLUMN doc SET STORAGE EXTERNAL",
               f"ALTER TABLE {name} ALTER COLUMN tags SET STORAGE EXTERNAL",
               f"ALTER TABLE {name} REPLICA IDENTITY {identity}",
               # md5 chains do not compress: stored out of line, so an update that leaves them is sent without them
               f"INSERT INTO {name} SELECT g, false, (SELECT string_agg(md5(g::text || i::text), '') "
               f"FROM generate_series(1, 200) i), ('{{\"k\": \"' || md5(g::text) || repeat(md5(g::text || 'x'), 150) "
               f"|| '\"}}')::jsonb, ARRAY(SELECT md5(i::text || g::text) FROM generate_series(1, 150) i) "
               f"FROM generate_series(1, 20) g")


def test_toasted_columns_an_update_leaves_keep_their_value_in_the_table_and_its_log(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, source: Source) -> None:
    """`UPDATE t SET vip = NOT vip` on rows whose large columns are stored out of line: Debezium sends its
    placeholder for them under REPLICA IDENTITY DEFAULT (checked in the topic); the table and its log keep the real
    values, through `tablestore ingest` (--create) and `read_cdc` into the `managed` sink; FULL sends whole images."""
    _toast_table(source, "toast_default", "DEFAULT")
    _toast_table(source, "toast_full", "FULL")
    prefix = source.capture()
    wh = tmp_path / "wh"
    for table in ("toast_default", "toast_full"):
        wait_for(lambda: _topics_ready(kafka_bootstrap, [prefix]), 60, "the topics")
    source.sql("UPDATE toast_default SET vip = NOT vip", "UPDATE toast_full SET vip = NOT vip",
               "UPDATE toast_default SET big = 'short' WHERE id = 3",
               "UPDATE toast_default SET vip = NOT vip WHERE id <= 5")
    topic = f"{prefix}.public.toast_default"
    wait_for(lambda: _placeholders(kafka_bootstrap, topic) >= 25, 60, "the updates in the topic")
    for table in ("toast_default", "toast_full"):
        job = IngestJob(spark, IngestConfig(
            table=f"src.{table}", topic=f"{prefix}.public.{table}", bootstrap_servers=kafka_bootstrap,
            warehouse=str(wh), create=True, available_now=True, table_options={"bucket": "2"},
            catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap}))
        job.run()
        want = source.rows(f"SELECT id, vip, big, doc::text AS doc, tags FROM {table} ORDER BY id")
        assert _read(wh, f"src.{table}") == want
        assert all(P not in str(r) for r in _log_rows(_table(wh, f"src.{table}"), kafka_bootstrap))
    # read_cdc into the managed sink: the same, on a table created beforehand
    from tablestore.spark import read_cdc

    ck = tmp_path / "ck"
    changes = read_cdc(spark, topic=topic, bootstrap_servers=kafka_bootstrap, table="src.toast_cdc",
                       warehouse=str(wh), create=True)
    query = (changes.writeStream.format("managed").option("warehouse", str(wh))
             .option("checkpointLocation", str(ck)).trigger(availableNow=True).start("src.toast_cdc"))
    query.awaitTermination(120)
    assert _read(wh, "src.toast_cdc") == source.rows("SELECT id, vip, big, doc::text AS doc, tags FROM toast_default "
                                                      "ORDER BY id")


def _placeholders(bootstrap: str, topic: str) -> int:
    return sum(1 for r in _records(bootstrap, topic) if r is not None and P.encode() in r)


def _records(bootstrap: str, topic: str) -> list[bytes | None]:
    """Every record of `topic` (none while it does not exist)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        if meta.error is not None:
            return []
        consumer.assign([TopicPartition(topic, p, 0) for p in meta.partitions])
        out: list[bytes | None] = []
        quiet = time.monotonic()
        while time.monotonic() - quiet < 2:
            got = [m for m in consumer.consume(1000, 0.3) if m.error() is None]
            if got:
                quiet = time.monotonic()
            out += [m.value() for m in got]
        return out
    finally:
        consumer.close()


def _log_rows(table: tablestore.Table, bootstrap: str) -> list[bytes | None]:
    return _records(bootstrap, table.options["log.topic"])


# -- 3. TRUNCATE -------------------------------------------------------------------------------------------------
def test_truncate_is_applied_at_its_place_ignored_or_refused(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, source: Source) -> None:
    """ingest.truncate = apply: the rows written before the TRUNCATE are gone, those after it kept (the table's log
    carries a -D of each row it held); ignore: the table keeps its rows; fail: one line naming it."""
    source.sql("CREATE TABLE t (id int PRIMARY KEY, v text)",
               "INSERT INTO t SELECT g, 'before' FROM generate_series(1, 30) g")
    prefix = source.capture()
    topic = f"{prefix}.public.t"
    wait_for(lambda: len(_records(kafka_bootstrap, topic)) >= 30, 60, "the snapshot")

    def job(policy: str) -> IngestJob:
        return IngestJob(spark, IngestConfig(
            table="src.t", topic=topic, bootstrap_servers=kafka_bootstrap, warehouse=str(tmp_path / policy),
            create=True, available_now=True, table_options={"bucket": "2", "ingest.truncate": policy},
            catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap}))

    job("apply").run()   # the table holds the 30 rows before the truncate
    source.sql("UPDATE t SET v = 'updated' WHERE id <= 10", "TRUNCATE t",
               "INSERT INTO t SELECT g, 'after' FROM generate_series(25, 40) g", "UPDATE t SET v = 'x' WHERE id = 40")
    wait_for(lambda: len(_records(kafka_bootstrap, topic)) >= 58, 60,
             lambda: f"the changes in the topic ({len(_records(kafka_bootstrap, topic))} of 58)")
    want = source.rows("SELECT id, v FROM t ORDER BY id")
    job("apply").run()   # a restart from its checkpoint: the updates, the truncate and what follows in one batch
    assert _read(tmp_path / "apply", "src.t") == want
    logged = _log_rows(_table(tmp_path / "apply", "src.t"), kafka_bootstrap)
    deletes = [r for r in logged if r is not None and b'"op":"d"' in r.replace(b" ", b"")]
    assert len(deletes) == 30, logged[:3]   # the table's own log: a -D of each row the truncate emptied
    job("ignore").run()
    ignored = _read(tmp_path / "ignore", "src.t")
    assert len(ignored) == 40 and ignored[0] == {"id": 1, "v": "updated"}
    with pytest.raises(Exception) as failed:
        job("fail").run()
    assert "TRUNCATE" in str(failed.value) and "ingest.truncate is 'fail'" in str(failed.value)
    assert "\n" not in str(failed.value)


# -- 4. schema changes while the job runs ------------------------------------------------------------------------
def test_schema_changes_in_postgres_while_the_job_runs(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, source: Source) -> None:
    """ADD COLUMN (with and without a default), ALTER COLUMN ... TYPE bigint, DROP COLUMN (the table keeps it: later
    rows null), RENAME COLUMN (Debezium sends the new name: a new column; the old one null from then on)."""
    source.sql("CREATE TABLE s (id int PRIMARY KEY, qty int, note text, old_name text)",
               "INSERT INTO s SELECT g, g, 'n', 'o' FROM generate_series(1, 10) g")
    prefix = source.capture()
    wait_for(lambda: len(_records(kafka_bootstrap, f"{prefix}.public.s")) >= 10, 60, "the snapshot in the topic")
    wh = tmp_path / "wh"
    job = IngestJob(spark, IngestConfig(
        table="src.s", topic=f"{prefix}.public.s", bootstrap_servers=kafka_bootstrap, warehouse=str(wh),
        create=True, trigger_interval="1 second", table_options={"bucket": "2"},
        catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap}))
    import threading

    failures: list[BaseException] = []

    def run() -> None:
        try:
            job.run()
        except BaseException as e:  # noqa: BLE001 - the test reports it
            failures.append(e)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        wait_for(lambda: _same(wh, "src.s", source.rows("SELECT * FROM s ORDER BY id")), 120, "the snapshot")
        steps = ["ALTER TABLE s ADD COLUMN plain text", "ALTER TABLE s ADD COLUMN flag int DEFAULT 7",
                 "INSERT INTO s (id, qty, plain) VALUES (11, 11, 'p')",
                 "ALTER TABLE s ALTER COLUMN qty TYPE bigint", "UPDATE s SET qty = 9999999999 WHERE id = 2",
                 "ALTER TABLE s DROP COLUMN note", "UPDATE s SET qty = 3 WHERE id = 3",
                 "ALTER TABLE s RENAME COLUMN old_name TO new_name", "UPDATE s SET new_name = 'renamed' WHERE id = 4"]
        for step in steps:
            source.sql(step)
        # Debezium sends no change for rows an ALTER leaves untouched: a column's DEFAULT, or its new name after a
        # RENAME, reaches the table with the rows written since (docs/cdc.md); every other value equals Postgres
        want = source.rows("SELECT id, qty, plain FROM s ORDER BY id")
        wait_for(lambda: _same(wh, "src.s", want) and _read(wh, "src.s")[3].get("new_name") == "renamed"
                 or not runner.is_alive(), 180,
                 lambda: f"the table to follow Postgres: {_read(wh, 'src.s')} != {want} ({job.progress})")
        assert _same(wh, "src.s", want), f"the job ended: {failures}"
    finally:
        job.request_stop()
        runner.join(120)
    table = _table(wh, "src.s")
    assert str(table.schema.field("qty").type) == "int64"
    rows = {r["id"]: r for r in _read(wh, "src.s")}
    assert rows[3]["note"] is None and rows[1]["note"] == "n"    # dropped: kept, null in rows written after
    assert rows[4]["new_name"] == "renamed" and rows[4]["old_name"] is None and rows[1]["old_name"] == "o"
    assert rows[11]["flag"] == 7 and rows[2]["flag"] == 7 and rows[1]["flag"] is None   # written since the ALTER


# -- 5. the initial snapshot of a big table, then the stream ---------------------------------------------------
SNAPSHOT_ROWS = int(os.environ.get("TABLESTORE_TEST_SNAPSHOT_ROWS", "100000"))
"""Rows of the snapshot test (CI's time); bench/postgres_cdc_bench.py snapshots 1M rows and checks them too."""


def test_the_initial_snapshot_of_a_big_table_then_writes_during_and_after_it(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, source: Source) -> None:
    source.sql("CREATE TABLE big (id bigint PRIMARY KEY, k int, v text, at timestamp(6))",
               f"INSERT INTO big SELECT g, g % 97, md5(g::text), '2024-01-01'::timestamp + g * interval '1 second' "
               f"FROM generate_series(1, {SNAPSHOT_ROWS}) g")
    prefix = source.capture()
    for i in range(20):   # during the snapshot: the connector reads the table while these commit
        source.sql(f"UPDATE big SET v = 'during {i}' WHERE id = {i * 997 + 1}",
                   f"DELETE FROM big WHERE id = {i * 991 + 2}",
                   f"INSERT INTO big VALUES ({SNAPSHOT_ROWS + i + 1}, 1, 'new', now())")
    wait_for(lambda: _topics_ready(kafka_bootstrap, [prefix]), 120, "the snapshot's topic")
    wh = tmp_path / "wh"
    job = IngestJob(spark, IngestConfig(
        table="src.big", topic=f"{prefix}.public.big", bootstrap_servers=kafka_bootstrap, warehouse=str(wh),
        create=True, trigger_interval="1 second", max_offsets_per_trigger=100_000,
        table_options={"bucket": "4"}, catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap}))
    import threading

    runner = threading.Thread(target=job.run, daemon=True)
    runner.start()
    try:
        source.sql("UPDATE big SET v = 'after' WHERE id % 1000 = 0", "DELETE FROM big WHERE id % 1000 = 1")
        count = source.rows("SELECT count(*) AS n FROM big")[0]["n"]
        wait_for(lambda: _count(wh, "src.big") == count, 600, f"{count} rows")
        want = source.rows("SELECT * FROM big ORDER BY id")
        wait_for(lambda: _read(wh, "src.big") == want, 120, "the table to equal Postgres")
    finally:
        job.request_stop()
        runner.join(120)


def _count(wh: Path, name: str) -> int:
    cat = tablestore.Catalog(str(wh))
    return cat.get_table(name).read(columns=["id"]).num_rows if cat.table_exists(name) else -1


# -- 6. a whole database in one job: a table added, kill -9, a bad record -----------------------------------------
def _sync_process(wh: Path, bootstrap: str, pattern: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "tablestore.cli", "ingest-database", "src", "--topic-pattern", pattern,
           "--bootstrap-servers", bootstrap, "--warehouse", str(wh), "--create", "--master", "local[2]",
           "--conf", "spark.sql.shuffle.partitions=2", "--table-option", "bucket=2", "--progress-every", "60"]
    with tempfile.TemporaryFile("w+") as out:   # the child keeps its own descriptor of it
        return subprocess.Popen(cmd, env=env, start_new_session=True, stdout=out, stderr=subprocess.STDOUT, text=True)


def _tables_equal(source: Source, wh: Path, tables: list[str]) -> bool:
    return all(_same(wh, f"src.{t}", source.rows(f"SELECT * FROM {t} ORDER BY id")) for t in tables)


def test_a_whole_database_in_one_job_with_a_table_added_and_the_job_killed(
        tmp_path: Path, kafka_bootstrap: str, source: Source) -> None:
    """`tablestore ingest-database` over the connector's topics: every table kept, a table created in Postgres while
    the job runs appears, kill -9 of the job at two points then a restart: every table equals Postgres and its
    log holds each change once."""
    source.sql("CREATE TABLE a (id int PRIMARY KEY, v text)", "CREATE TABLE b (id int PRIMARY KEY, n numeric(8,2))",
               "INSERT INTO a SELECT g, 'a' || g FROM generate_series(1, 50) g",
               "INSERT INTO b SELECT g, g * 1.5 FROM generate_series(1, 50) g")
    prefix = source.capture()
    wh = tmp_path / "wh"
    pattern = rf"{prefix}\.public\..*"
    job = _sync_process(wh, kafka_bootstrap, pattern)
    try:
        wait_for(lambda: _tables_equal(source, wh, ["a", "b"]), 240, "tables a and b")
        source.sql("CREATE TABLE c (id int PRIMARY KEY, w boolean)",
                   "INSERT INTO c SELECT g, g % 2 = 0 FROM generate_series(1, 20) g",
                   "UPDATE a SET v = 'changed' WHERE id < 10")
        wait_for(lambda: _tables_equal(source, wh, ["a", "b", "c"]), 180, "the new table c")
        for round_ in range(2):
            source.sql(f"UPDATE b SET n = n + 1 WHERE id % 3 = {round_}", f"DELETE FROM c WHERE id = {round_ + 1}",
                       f"INSERT INTO a VALUES ({100 + round_}, 'r{round_}')")
            time.sleep(1.5 + round_)   # mid-batch for one round, between batches for the other
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
            job = _sync_process(wh, kafka_bootstrap, pattern)
        wait_for(lambda: _tables_equal(source, wh, ["a", "b", "c"]), 240, "every table after the restarts")
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait()
    for name in ("a", "b", "c"):
        table = _table(wh, f"src.{name}")
        logged = [r for r in _log_rows(table, kafka_bootstrap) if r is not None]
        appended = sum(s.delta_record_count for s in table.snapshots() if s.kind == "APPEND")
        assert len(logged) == appended, name   # each change once in the log: no batch committed twice


# -- 7. a malformed record; the Connect worker killed ---------------------------------------------------------------
def test_a_malformed_record_in_a_debezium_topic_stops_the_job_naming_it_or_is_skipped(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, source: Source) -> None:
    from tablestore.spark.ingest_evolve import IngestError

    source.sql("CREATE TABLE m (id int PRIMARY KEY, v text)", "INSERT INTO m SELECT g, 'x' FROM generate_series(1, 5) g")
    prefix = source.capture()
    topic = f"{prefix}.public.m"
    wait_for(lambda: len(_records(kafka_bootstrap, topic)) >= 5, 60, "the snapshot")
    import logstore

    logstore.produce_raw({"bootstrap.servers": kafka_bootstrap}, topic, [(b'{"id": 9}', b'{"payload": {"op": "c", "af')])
    source.sql("INSERT INTO m VALUES (6, 'y')")
    wait_for(lambda: len(_records(kafka_bootstrap, topic)) >= 7, 60, "the records after it")

    def run(policy: str, wh: Path) -> Any:
        return IngestJob(spark, IngestConfig(table="src.m", topic=topic, bootstrap_servers=kafka_bootstrap,
                                             warehouse=str(wh), create=True, available_now=True, bad_records=policy,
                                             catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap}))

    with pytest.raises(IngestError) as failed:
        run("fail", tmp_path / "fail").run()
    message = str(failed.value)
    assert f"in topic {topic} partition 0 offset 5" in message and "\n" not in message
    progress = run("skip", tmp_path / "skip").run()
    assert progress.bad_records == 1
    assert _read(tmp_path / "skip", "src.m") == source.rows("SELECT * FROM m ORDER BY id")


def test_the_connect_worker_killed_while_postgres_writes_the_table_catches_up(
        spark: Any, tmp_path: Path, kafka_bootstrap: str, source: Source, worker_and_dir: Any) -> None:
    from tablestore.cdc import connect

    source.sql("CREATE TABLE w (id int PRIMARY KEY, v int)", "INSERT INTO w SELECT g, 0 FROM generate_series(1, 100) g")
    prefix = source.capture()
    wh = tmp_path / "wh"
    job = _sync_process(wh, kafka_bootstrap, rf"{prefix}\.public\..*")
    try:
        wait_for(lambda: _tables_equal(source, wh, ["w"]), 240, "table w")
        w, rdir = worker_and_dir
        source.sql("UPDATE w SET v = 1 WHERE id <= 50")
        os.kill(w.pid, signal.SIGKILL)
        source.sql("UPDATE w SET v = 2 WHERE id > 50", "DELETE FROM w WHERE id % 10 = 0")   # while it is down
        connect.start(rdir, port=pg_source.CONNECT_PORT, bootstrap_servers=kafka_bootstrap)
        source.sql("INSERT INTO w VALUES (1000, 3)")
        wait_for(lambda: _tables_equal(source, wh, ["w"]), 240, "table w after the worker's restart")
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
