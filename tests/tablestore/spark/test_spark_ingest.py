"""`tablestore ingest` and `tablestore.spark.read_cdc` against the project's Kafka broker and real Spark: the table
ends equal to the source's state (tablestore.cdc.shop's ground truth) and its own log holds each change once,
through restarts, kill -9 at the commit points, schema changes mid-stream and bad records."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pyspark
import pytest
from confluent_kafka import Consumer, TopicPartition

import logstore
import tablestore
from logstore.kafka import KafkaAdmin
from tablestore.cdc.shop import ShopOrders
from tablestore.faults import FAULT_ENV

pytestmark = [pytest.mark.spark, pytest.mark.kafka]
PYSPARK_4_1 = tuple(int(p) for p in pyspark.__version__.split(".")[:2]) < (4, 2)
restart_in_process = pytest.mark.skipif(
    PYSPARK_4_1, reason="PySpark 4.1: a query restarted in the same session after its micro-batch failed dies in "
                        "Spark (NullPointerException at scala.Option.get); docs/cdc.md")
ROOT = Path(__file__).resolve().parents[3]
TABLE = "shop.orders"


def _topic(bootstrap: str, partitions: int = 2) -> str:
    name = f"cdc-{uuid.uuid4().hex[:8]}"
    KafkaAdmin({"bootstrap.servers": bootstrap}).create_topic(name, partitions, None)
    return name


def _produce(bootstrap: str, topic: str, records: Any) -> None:
    logstore.produce_raw({"bootstrap.servers": bootstrap}, topic, records)


def _ingest(warehouse: Path, topic: str, bootstrap: str, *extra: str, fault: str | None = None,
            marker: Path | None = None, timeout_s: float = 300) -> subprocess.CompletedProcess[str]:
    """`tablestore ingest` in a process group of its own; with a fault, kill -9 the group once it stops there."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    env.pop(FAULT_ENV, None)
    if fault is not None:
        env[FAULT_ENV] = f"{fault}:{marker}"
    cmd = [sys.executable, "-m", "tablestore.cli", "ingest", TABLE, "--topic", topic, "--bootstrap-servers",
           bootstrap, "--warehouse", str(warehouse), "--master", "local[2]", "--conf",
           "spark.sql.shuffle.partitions=2", "--progress-every", "60", *extra]
    # output to files, not pipes: a pipe nobody reads while the job runs fills up and blocks the job's logging
    out_file, err_file = (tempfile.TemporaryFile("w+") for _ in range(2))
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=out_file, stderr=err_file, text=True)

    def done(code: int) -> subprocess.CompletedProcess[str]:
        proc.wait()
        out_file.seek(0)
        err_file.seek(0)
        return subprocess.CompletedProcess(cmd, code, out_file.read(), err_file.read())

    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            if marker is not None and marker.exists():
                os.killpg(proc.pid, signal.SIGKILL)
                return done(-9)
            if proc.poll() is not None:
                return done(proc.returncode)
            time.sleep(0.2)
        raise AssertionError("tablestore ingest did not finish in time")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        out_file.close()
        err_file.close()


def _ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout


def _table(warehouse: Path) -> tablestore.Table:
    return tablestore.Catalog(str(warehouse)).get_table(TABLE)


def _rows(table: tablestore.Table) -> list[dict[str, Any]]:
    return sorted(table.read().to_pylist(), key=lambda r: r["order_id"])


def _log_is_once(table: tablestore.Table, bootstrap: str) -> None:
    """The table's own log: exactly the records its APPEND snapshots committed (none twice), and replayed by key it
    is the table."""
    topic = table.options["log.topic"]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "ingest-test", "enable.auto.commit": False,
                         "isolation.level": "read_committed"})
    count = 0
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(int(table.describe()["bucket"]))])
        quiet = time.monotonic()
        while time.monotonic() - quiet < 3:
            got = [m for m in consumer.consume(num_messages=1000, timeout=0.3) if m.error() is None]
            if got:
                quiet = time.monotonic()
            count += len(got)
    finally:
        consumer.close()
    appended = sum(s.delta_record_count for s in table.snapshots() if s.kind == "APPEND")
    assert count == appended
    state: dict[int, dict[str, Any]] = {}
    for batch in table.read_changes(scan="full", timeout_s=1.0):
        for r in batch.to_pylist():
            kind = r.pop("_row_kind")
            if kind in ("+I", "+U"):
                state[r["order_id"]] = r
            else:
                state.pop(r["order_id"], None)
    assert sorted(state.values(), key=lambda r: r["order_id"]) == _rows(table)


@pytest.mark.version_independent
@pytest.mark.timeout(1200)
def test_ingest_creates_the_table_and_a_restart_continues_exactly_once(
        tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap)
    shop = ShopOrders(keys=150, key_change_ratio=0.03)
    _produce(kafka_bootstrap, topic, shop.events(400))
    out = _ok(_ingest(tmp_path / "wh", topic, kafka_bootstrap, "--create", "--available-now",
                      "--table-option", "bucket=2"))
    assert "ingested" in out and f"into {TABLE}" in out
    table = _table(tmp_path / "wh")
    assert table.primary_key == ["order_id"]
    assert _rows(table) == shop.expected_rows()
    assert (Path(table.path) / "checkpoint" / f"ingest-{topic}").is_dir()   # the default checkpoint

    _produce(kafka_bootstrap, topic, shop.events(300))   # the source goes on; a plain restart resumes
    _ok(_ingest(tmp_path / "wh", topic, kafka_bootstrap, "--available-now"))
    table = _table(tmp_path / "wh")
    assert _rows(table) == shop.expected_rows()
    _log_is_once(table, kafka_bootstrap)


def _job(spark: Any, warehouse: Path, topic: str, bootstrap: str, **config: Any) -> Any:
    """The ingest job in this process, on the tests' session (`tablestore ingest` without its own Spark start)."""
    from tablestore.spark.ingest import IngestConfig, IngestJob

    return IngestJob(spark, IngestConfig(
        table=TABLE, topic=topic, bootstrap_servers=bootstrap, warehouse=str(warehouse), create=True,
        available_now=True, catalog_options={"log.properties.bootstrap.servers": bootstrap}, **config))


@restart_in_process
@pytest.mark.timeout(900)
def test_a_column_added_and_a_type_widened_in_the_source_evolve_the_table(
        spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    topic = _topic(kafka_bootstrap)
    shop = ShopOrders(keys=100)
    _produce(kafka_bootstrap, topic, shop.events(200))
    shop.add_coupon()                       # ALTER TABLE orders ADD COLUMN coupon in the source database
    _produce(kafka_bootstrap, topic, shop.events(200))
    shop.widen_customer()                   # ... ALTER COLUMN customer_id TYPE BIGINT
    _produce(kafka_bootstrap, topic, shop.events(200))
    progress = _job(spark, tmp_path / "wh", topic, kafka_bootstrap).run()
    assert progress.schema_changes == ["add column coupon string", "widen column customer_id to int64"]
    table = _table(tmp_path / "wh")
    assert table.schema.names[-1] == "coupon" and str(table.schema.field("customer_id").type) == "int64"
    assert _rows(table) == shop.expected_rows()


@pytest.mark.timeout(900)
def test_schema_evolution_fail_stops_naming_the_column(spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    from tablestore.spark.ingest import IngestError

    topic = _topic(kafka_bootstrap)
    shop = ShopOrders(keys=50)
    _produce(kafka_bootstrap, topic, shop.events(50))
    shop.add_coupon()
    _produce(kafka_bootstrap, topic, shop.events(50))
    job = _job(spark, tmp_path / "wh", topic, kafka_bootstrap, table_options={"ingest.schema-evolution": "fail"})
    with pytest.raises(IngestError) as failed:
        job.run()
    assert "add column coupon string" in str(failed.value) and "ingest.schema-evolution is 'fail'" in str(failed.value)
    assert "coupon" not in _table(tmp_path / "wh").schema.names


@restart_in_process
@pytest.mark.timeout(900)
def test_a_bad_record_stops_the_job_naming_its_offset_and_skip_counts_it(
        spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    from tablestore.spark.ingest import IngestError

    topic = _topic(kafka_bootstrap, partitions=1)
    shop = ShopOrders(keys=50)
    _produce(kafka_bootstrap, topic, list(shop.events(30)) + [(ShopOrders.key(9999), b"{not json")] +
             list(shop.events(30)))
    with pytest.raises(IngestError) as failed:
        _job(spark, tmp_path / "wh", topic, kafka_bootstrap).run()
    assert str(failed.value).startswith(f"TABLESTORE_CDC_BAD_RECORD: table {TABLE}: bad debezium-json record in "
                                        f"topic {topic} partition 0 offset 30: not valid JSON")
    assert _table(tmp_path / "wh").snapshots() == []   # nothing of the failed micro-batch was committed

    progress = _job(spark, tmp_path / "wh", topic, kafka_bootstrap, bad_records="skip").run()
    assert progress.bad_records == 1
    assert _rows(_table(tmp_path / "wh")) == shop.expected_rows()


@pytest.mark.timeout(900)
def test_read_cdc_into_a_managed_stream_write(spark: Any, tmp_path: Path, spark_warehouse: Path,
                                              kafka_bootstrap: str) -> None:
    """The Python API: read_cdc + writeStream.format("managed"), an upsert-json topic with tombstones."""
    import tablestore.spark

    topic = _topic(kafka_bootstrap)
    cat = tablestore.Catalog(str(spark_warehouse))
    cat.create_database("cdc", ignore_if_exists=True)
    import pyarrow as pa

    cat.create_table("cdc.kv", pa.schema([pa.field("k", pa.int64(), False), ("v", pa.string())]), primary_key=["k"],
                     options={"bucket": "2"})
    records = [(b'{"k": %d}' % (i % 20), b'{"k": %d, "v": "v%d"}' % (i % 20, i)) for i in range(100)]
    records += [(b'{"k": %d}' % k, None) for k in range(0, 20, 3)]
    _produce(kafka_bootstrap, topic, records)
    changes = tablestore.spark.read_cdc(spark, topic=topic, bootstrap_servers=kafka_bootstrap,
                                        format="upsert-json", table="cdc.kv")
    assert changes.columns == ["_row_kind", "k", "v"]
    query = (changes.writeStream.format("managed").option("checkpointLocation", str(tmp_path / "ck"))
             .trigger(availableNow=True).start("cdc.kv"))
    query.awaitTermination(300)
    expected: dict[int, str] = {}
    for key, value in records:
        k = int(key.decode().split(":")[1].strip(" }"))
        if value is None:
            expected.pop(k, None)
        else:
            expected[k] = value.decode().split('"v": "')[1].rstrip('"}')
    got = {r["k"]: r["v"] for r in cat.get_table("cdc.kv").read().to_pylist()}
    assert got == expected


def test_the_failure_s_first_decoder_marker_decides_what_it_is() -> None:
    """Spark's exception text goes on with the query's plan, whose decoder expressions hold both markers: the
    message's own marker (the first) decides whether the job evolves the table or stops."""
    from tablestore.spark.cdc_decode import BAD_RECORD, SCHEMA_CHANGE
    from tablestore.spark.ingest_evolve import decoder_error as _decoder_error

    plan = (f"\n=== Streaming Query ===\nProject [raise_error(concat({SCHEMA_CHANGE}: table shop.orders: schema change, "
            f"concat( in topic , __cdc_topic#291,  partition , cast(__cdc_partition#292 as string),  offset , ...)), "
            f"concat({BAD_RECORD}: table shop.orders: bad debezium-json record, concat( in topic , ...)]")
    bad = f"[USER_RAISED_EXCEPTION] {BAD_RECORD}: table shop.orders: bad debezium-json record in topic t partition 0 " \
          f"offset 30: not a Debezium change event (no 'op') SQLSTATE: P0001{plan}"
    assert _decoder_error(bad) == (BAD_RECORD, "table shop.orders: bad debezium-json record in topic t partition 0 "
                                               "offset 30: not a Debezium change event (no 'op')")
    change = f"[USER_RAISED_EXCEPTION] {SCHEMA_CHANGE}: table shop.orders: schema change in topic t partition 1 " \
             f"offset 7: its columns or their types are not the table's{plan}"
    assert _decoder_error(change)[0] == SCHEMA_CHANGE
    # PySpark 4.1 puts the plan before the message
    plan_first = f"[STREAM_FAILED] Query terminated with exception: {plan} Caused by: {change}"
    assert _decoder_error(plan_first) == (SCHEMA_CHANGE, "table shop.orders: schema change in topic t partition 1 "
                                                        "offset 7: its columns or their types are not the table's")
    assert _decoder_error("java.io.IOException: disk full\n at ...") == (None, "java.io.IOException: disk full")
    python = ("[STREAM_FAILED] Query failed: [PYTHON_DATA_SOURCE_ERROR] writer: Traceback (most recent call last):\n"
              '  File "w.py", line 3, in f\n    check()\n'
              "tablestore.spark.source_options.DataSourceOptionError: table 'shop.orders': unknown option 'x'\n")
    assert _decoder_error(python) == (None, "[STREAM_FAILED] Query failed: [PYTHON_DATA_SOURCE_ERROR] writer: "
                                            "tablestore.spark.source_options.DataSourceOptionError: table "
                                            "'shop.orders': unknown option 'x'")   # the exception, not "Traceback"


def _canal(table: str, type_: str, rows: list[dict[str, str]], old: list[dict[str, str]] | None = None,
           database: str = "shop_db") -> bytes:
    """A canal-json record of table `<database>.<table>` (a: id, name, and note once added; b: id, sku, qty; c: id,
    city), as canal writes it."""
    types = {"a": {"id": "int(11)", "name": "varchar(32)", "note": "varchar(64)"},
             "b": {"id": "int(11)", "sku": "varchar(16)", "qty": "int(11)"},
             "c": {"id": "int(11)", "city": "varchar(32)"}}[table]
    types = {k: v for k, v in types.items() if k in {name for row in rows for name in row}}
    return json.dumps({"data": rows, "old": old, "database": database, "table": table, "type": type_,
                       "isDdl": False, "pkNames": ["id"], "mysqlType": types, "es": 1700000000000,
                       "ts": 1700000000001}).encode()


@pytest.mark.version_independent
@pytest.mark.timeout(900)
def test_a_canal_topic_of_two_tables_into_the_table_of_one(tmp_path: Path, kafka_bootstrap: str) -> None:
    """canal's usual topic carries several tables: `--source-table shop_db.a` (or, without it, the table of the
    record the table is created from, a's here) keeps a's records; b's (other columns, a type canal does not have)
    give no rows, never widen the table. Under `--bad-records skip` the summary counts records: a bad record of a's
    with two unreadable rows is one, and the events are the records read but the bad ones."""
    topic = _topic(kafka_bootstrap, partitions=1)
    records = [
        _canal("a", "INSERT", [{"id": "1", "name": "one"}, {"id": "2", "name": "two"}]),
        _canal("b", "INSERT", [{"id": "1", "sku": "s1", "qty": "3"}]),
        _canal("a", "UPDATE", [{"id": "1", "name": "uno"}], old=[{"name": "one"}]),
        _canal("b", "UPDATE", [{"id": "1", "sku": "s1", "qty": "4"}], old=[{"qty": "3"}]),
        b"{not json",
        _canal("a", "INSERT", [{"id": "x", "name": "bad"}, {"id": "y", "name": "bad"}]),
        json.dumps({"data": [{"id": "9"}], "database": "shop_db", "table": "b", "type": "ODD"}).encode(),
        _canal("a", "DELETE", [{"id": "2", "name": "two"}]),
        _canal("b", "INSERT", [{"id": "2", "sku": "s2", "qty": "1"}]),
    ]
    _produce(kafka_bootstrap, topic, [(None, r) for r in records])
    for warehouse, extra in ((tmp_path / "given", ["--source-table", "shop_db.a"]), (tmp_path / "chosen", [])):
        out = _ok(_ingest(warehouse, topic, kafka_bootstrap, "--format", "canal-json", "--create",
                          "--available-now", "--bad-records", "skip", *extra))
        assert f"ingested 7 events into {TABLE} as 5 changes in " in out, out   # a: 2 +I, -U +U, -D
        assert ": 1 snapshot; skipped 2 bad records" in out, out
        assert "source table: shop_db.a" in out, out
        table = _table(warehouse)
        assert table.schema.names == ["id", "name"] and table.primary_key == ["id"]
        assert table.read().to_pylist() == [{"id": 1, "name": "uno"}]


@pytest.mark.timeout(900)
def test_ingest_database_routes_canal_records_by_database_and_table(
        spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    """`ingest-database` on a canal topic: a table per source table, named after its table part, each with its own
    columns; two databases' tables of one name would go to one table: an error naming both."""
    from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob
    from tablestore.spark.ingest_evolve import IngestError

    topic = _topic(kafka_bootstrap, partitions=1)
    _produce(kafka_bootstrap, topic, [(None, r) for r in (
        _canal("a", "INSERT", [{"id": "1", "name": "one"}]),
        _canal("b", "INSERT", [{"id": "1", "sku": "s", "qty": "2"}]),
        _canal("a", "UPDATE", [{"id": "1", "name": "uno"}], old=[{"name": "one"}]))])

    def job(warehouse: Path) -> Any:
        return DatabaseIngestJob(spark, DatabaseIngestConfig(
            database="wh_db", topic_pattern=topic, bootstrap_servers=kafka_bootstrap, warehouse=str(warehouse),
            format="canal-json", create=True, available_now=True,
            catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap}))

    job(tmp_path / "one").run()
    cat = tablestore.Catalog(str(tmp_path / "one"))
    a, b = cat.get_table("wh_db.a"), cat.get_table("wh_db.b")
    assert a.schema.names == ["id", "name"] and a.read().to_pylist() == [{"id": 1, "name": "uno"}]
    assert b.schema.names == ["id", "sku", "qty"] and b.read().to_pylist() == [{"id": 1, "sku": "s", "qty": 2}]

    _produce(kafka_bootstrap, topic, [(None, _canal("a", "INSERT", [{"id": "7", "name": "x"}], database="other_db"))])
    with pytest.raises(IngestError) as failed:
        job(tmp_path / "two").run()
    assert "source tables 'other_db.a' and 'shop_db.a' both go to table 'wh_db.a'" in str(failed.value)


@pytest.mark.timeout(900)
def test_ingest_database_skips_a_bad_record_of_one_table_and_evolves_another_in_one_micro_batch(
        spark: Any, tmp_path: Path, kafka_bootstrap: str) -> None:
    """One micro-batch of three tables: a value table b's column cannot hold (skipped and counted once, b's other
    rows kept), a new column in table a (a altered, the batch written again), table c untouched by either."""
    from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob

    topic = _topic(kafka_bootstrap, partitions=1)
    _produce(kafka_bootstrap, topic, [(None, r) for r in (
        _canal("a", "INSERT", [{"id": "1", "name": "one"}]),
        _canal("b", "INSERT", [{"id": "1", "sku": "s", "qty": "2"}]),
        _canal("c", "INSERT", [{"id": "1", "city": "Lyon"}]))])
    config = DatabaseIngestConfig(
        database="wh_db", topic_pattern=topic, bootstrap_servers=kafka_bootstrap, warehouse=str(tmp_path),
        format="canal-json", create=True, available_now=True, bad_records="skip",
        catalog_options={"log.properties.bootstrap.servers": kafka_bootstrap})
    DatabaseIngestJob(spark, config).run()   # the tables, created from their first records
    _produce(kafka_bootstrap, topic, [(None, r) for r in (
        _canal("b", "INSERT", [{"id": "2", "sku": "t", "qty": "many"}]),
        _canal("a", "INSERT", [{"id": "2", "name": "two", "note": "new column"}]),
        _canal("b", "INSERT", [{"id": "3", "sku": "u", "qty": "5"}]),
        _canal("c", "UPDATE", [{"id": "1", "city": "Nice"}], old=[{"city": "Lyon"}]))])
    progress = DatabaseIngestJob(spark, config).run()
    assert progress.bad_records == 1, progress
    assert progress.schema_changes == ["wh_db.a: add column note string"], progress
    assert progress.tables == {"wh_db.a": 1, "wh_db.b": 2, "wh_db.c": 1}, progress
    cat = tablestore.Catalog(str(tmp_path))
    assert sorted(cat.get_table("wh_db.a").read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "name": "one", "note": None}, {"id": 2, "name": "two", "note": "new column"}]
    assert sorted(cat.get_table("wh_db.b").read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "sku": "s", "qty": 2}, {"id": 3, "sku": "u", "qty": 5}]
    assert cat.get_table("wh_db.c").read().to_pylist() == [{"id": 1, "city": "Nice"}]
