"""The workloads `bench/peers_systems.py` runs for one system in its process (`bench/spark_peers.py` describes them).

Groups (`--workloads`): `bulk` (the bulk insert), `upserts` (the upserts, then the reads, a full compaction and the
reads again), `stream` (the streaming upserts), `latency` (commit to change stream). The `wide8` shape runs `upserts`
only (the others are made for the narrow columns).

Reads: each of the shape's reads (`bench/peers_shapes.py`: scan into `noop`, a SQL aggregate over every column, the
1% key range) runs READS times in a new session of the process's warm JVM (`spark.newSession()`: its own catalogs,
with nothing of the table cached), after a `SELECT 1` that builds the session's state: the first run is the table's
first query in that session, recorded as "<read> (first run)", and the best of the READS as "<read>".
"""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from peers_latency import COMMITS, latency
from peers_shapes import same

if TYPE_CHECKING:
    from peers_systems import System

WORKLOADS = ("bulk", "upserts", "stream", "latency")
READS = 5
"""Reads run this many times, the best kept (the first read of a table also pays for opening it, and the machine's
load drifts: queries of tens of milliseconds moved by 20-30% between runs with 3); the first run is reported too."""
BULK_ROUNDS = 3
"""The bulk insert runs this many times, each into a new table, the median kept (a single timed write of 2-3 s moved
by 10-15% between runs); the upserts, the compaction and the streaming write change one table and run once."""
AFTER_COMPACTION = {"scan": "scan after compaction", "aggregate": "aggregate after compaction",
                    "1% key range": "1% range after compaction"}


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def _answer(spark: Any, sql_from: str) -> list[int]:
    row = spark.sql(f"SELECT count(*), coalesce(sum(a), 0) FROM {sql_from}").collect()[0]
    return [int(row[0]), int(row[1])]


def reads(spark: Any, system: System, table: str, truth: dict[str, Any], record: Callable[..., None],
          checks: dict[str, Any], after: bool, repeat: int = READS) -> None:
    """Every read of the shape on `table`, each in a new session: its first run and the best of READS recorded;
    a collected answer checked at every run, a read into `noop` by a count and sum of the same rows after."""
    for read, (sql, sink) in system.shape.reads.items():
        name = AFTER_COMPACTION[read] if after else read
        query = sql.format(t=table, lo=truth["lo"], hi=truth["hi"])
        session = spark.newSession()
        session.sql("SELECT 1").collect()
        answers: list[Any] = []
        if sink == "noop":
            def once() -> None:
                session.sql(query).write.format("noop").mode("overwrite").save()
        else:
            def once() -> None:
                answers.append(session.sql(query).collect()[0])
        rounds = [_timed(once) for _ in range(repeat)]
        rows = truth["range"][0] if "range" in read else truth["final"][0]
        record(name, min(rounds), rows, rounds=rounds)
        record(f"{name} (first run)", rounds[0], rows)
        if sink == "noop":
            where = f" WHERE id >= {truth['lo']} AND id < {truth['hi']}" if "range" in read else ""
            checks[name] = _answer(spark, f"{table}{where}") == truth["range" if where else "final"]
        else:
            checks[name] = all(same(a, truth[sink]) for a in answers)
            if not checks[name]:
                print(f"{system.key}: {name}: {answers[0]} != {truth[sink]}", flush=True)


def run(system: System, data: Path, truth: dict[str, Any], timings: dict[str, Any], workloads: list[str],
        prefix: str = "", commits: int = COMMITS, repeat: int = READS) -> None:
    """The `workloads` once on fresh tables named with `prefix` (the warm-up pass uses its own, and runs each read
    `repeat` = 2 times)."""
    spark = system.session()
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(str(data / "base.parquet")).createOrReplaceTempView("base_src")
    batches = sorted(str(p) for p in (data / "batches").glob("*.parquet"))
    checks: dict[str, Any] = {}

    def record(name: str, seconds: float, rows: int, form: str = "", rounds: list[float] | None = None) -> None:
        timings[name] = {"seconds": seconds, "rows": rows, "form": form, **({"rounds": rounds} if rounds else {})}

    def bulk_insert(name: str, table: str, form: str, unshuffled: bool) -> None:
        """BULK_ROUNDS inserts of the bulk rows, each into a new table; the median recorded, every answer checked."""
        rounds, right = [], True
        for i in range(BULK_ROUNDS):
            system.create(spark, f"{table}{i}", changes=False, bulk=unshuffled)
            rounds.append(_timed(lambda: system.insert(spark, f"{table}{i}", "bulk_src")))
            right = right and _answer(spark, system.name(f"{table}{i}")) == truth["bulk"]
        record(name, statistics.median(rounds), truth["bulk"][0], form, rounds)
        checks[name] = right

    bulk, up, st = f"{prefix}bulk", f"{prefix}up", f"{prefix}st"
    if "bulk" in workloads:
        spark.read.parquet(str(data / "bulk.parquet")).createOrReplaceTempView("bulk_src")
        bulk_insert("bulk insert", bulk, system.bulk_form, unshuffled=True)
        if system.key.startswith("tablestore"):   # its default too: shuffled by bucket, one writer (and run) per bucket
            bulk_insert("bulk insert, shuffled by bucket", f"{bulk}s",
                        "SQL INSERT, 'sink.shuffle-by-bucket' = 'true' (the default)", unshuffled=False)

    if "upserts" in workloads:
        system.create(spark, up, changes=True)
        system.insert(spark, up, "base_src")

        def upserts() -> None:
            for b in batches:
                system.upsert(spark, up, b)

        record("upserts", _timed(upserts), truth["changes"], system.upsert_form)
        final = system.name(up)
        if system.key == "parquet":   # the floor has no upserts: its reads read the final rows as plain Parquet
            final = f"parquet.`{data / 'final.parquet'}`"
        reads(spark, system, final, truth, record, checks, after=False, repeat=repeat)
        if system.key != "parquet":
            checks["upserts"] = _answer(spark, final) == truth["final"]
            record("full compaction", _timed(lambda: system.compact(spark, up)), truth["final"][0])
            checks["full compaction"] = _answer(spark, final) == truth["final"]
            reads(spark, system, final, truth, record, checks, after=True, repeat=repeat)

    if "stream" in workloads:
        system.create(spark, st, changes=True)
        system.insert(spark, st, "base_src")
        stream = (spark.readStream.schema(f"{system.shape.ddl.replace(' NOT NULL', '')}, op STRING")
                  .option("maxFilesPerTrigger", 1).parquet(str(data / "batches")))
        checkpoint = str(system.work / "checkpoints" / st)

        def streamed() -> None:
            query = system.stream_upsert(spark, st, stream, checkpoint)
            query.awaitTermination()
            if query.exception() is not None:
                raise RuntimeError(f"{system.key}: the streaming write failed: {query.exception()}")

        record("streaming upserts (10 micro-batches)", _timed(streamed), truth["changes"], system.stream_form)
        if system.key != "parquet":
            checks["streaming upserts"] = _answer(spark, system.name(st)) == truth["final"]
    if "latency" in workloads:
        latency(system, spark, f"{prefix}lat", data, timings, commits)
    timings["_checks"] = checks
    timings["_spark"] = spark.version
