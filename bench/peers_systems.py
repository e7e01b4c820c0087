"""The systems `bench/spark_peers.py` races, each with its fastest form of every workload, in one Spark session of
its own process (`python bench/peers_systems.py SYSTEM DATA_DIR RESULT.json SCALE_NAME`).

Every table has the columns `id BIGINT NOT NULL, a BIGINT, b DOUBLE, c STRING` and primary key `id` where the system
has keys (Paimon and tablestore: 2 fixed buckets; Delta and Parquet: none). Upserts come as Parquet batches with a
column `op` (`+I`, `+U`, `-D`), and each system applies them its fastest way:
- tablestore: the batch as a `_row_kind` DataFrame, `df.write.format("managed")`;
- Paimon: `INSERT INTO` a table whose `rowkind.field` is `op` (one commit per batch, deletes included);
- Delta: `MERGE INTO` (what Delta's users do; Delta has no changelog write);
- Parquet (the floor): the batch appended as files, with no upsert semantics at all.
Compaction is each system's full compaction (`CALL managed.system.compact`, `CALL paimon.sys.compact`, `OPTIMIZE`).
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers_latency import COMMITS, latency  # noqa: E402  (bench/ is this script's directory)

COLUMNS = "id, a, b, c"
DDL = "id BIGINT NOT NULL, a BIGINT, b DOUBLE, c STRING"


class System:
    """One system's session and statements; `t` is a table's short name, `name(t)` its name in SQL."""
    key = ""
    bulk_form = "SQL INSERT"
    upsert_form = ""
    stream_form = ""
    changes_form = ""

    def __init__(self, work: Path) -> None:
        self.work = work

    def session(self) -> Any:
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master("local[2]").appName(f"peers-{self.key}")
        for k, v in {**COMMON_CONF, **self.conf()}.items():
            builder = builder.config(k, v)
        return builder.getOrCreate()

    def conf(self) -> dict[str, str]:
        return {}

    def name(self, t: str) -> str:
        raise NotImplementedError

    def create(self, spark: Any, t: str, changes: bool, bulk: bool = False) -> None:
        raise NotImplementedError

    def insert(self, spark: Any, t: str, view: str) -> None:
        spark.sql(f"INSERT INTO {self.name(t)} SELECT {COLUMNS}{self._op(t)} FROM {view}")

    def _op(self, t: str) -> str:
        return ""

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        raise NotImplementedError

    def compact(self, spark: Any, t: str) -> None:
        raise NotImplementedError

    def stream_upsert(self, spark: Any, t: str, batches: Any, checkpoint: str) -> Any:
        raise NotImplementedError

    def changes(self, spark: Any, t: str) -> Any:
        """A stream of the table's changes from now on."""
        raise NotImplementedError

    def feed(self, spark: Any, t: str) -> None:
        """Make `t` (just created, empty) readable as a stream of changes."""

    def commit_files(self, t: str) -> str:
        """A glob of the files whose writing makes a commit of `t` visible (the latency's clock starts at the
        modification time of the first one a write adds or rewrites)."""
        raise NotImplementedError


COMMON_CONF = {
    "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false", "spark.driver.memory": "4g",
    "spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
}


class Tablestore(System):
    key = "tablestore"
    bulk_form = "SQL INSERT into a table with 'sink.shuffle-by-bucket' = 'false' (a run per task and bucket)"
    upsert_form = "_row_kind DataFrame, df.write.format('managed')"
    stream_form = "writeStream.format('managed') of the _row_kind stream"
    changes_form = "changelog.normalize = false: the records as written (+I/-D, as Paimon's)"

    def session(self) -> Any:
        import tablestore.spark

        conf = {k: v for k, v in COMMON_CONF.items() if not k.startswith("spark.driver.host")
                and not k.startswith("spark.driver.bind")}
        return tablestore.spark.local_session("peers-tablestore", conf={
            **conf, "spark.sql.catalog.managed.warehouse": str(self.work / "managed")})

    def name(self, t: str) -> str:
        return f"managed.bench.{t}"

    def create(self, spark: Any, t: str, changes: bool, bulk: bool = False) -> None:
        spark.sql("CREATE DATABASE IF NOT EXISTS managed.bench")
        unshuffled = ", 'sink.shuffle-by-bucket' = 'false'" if bulk else ""
        spark.sql(f"CREATE TABLE {self.name(t)} ({DDL}) TBLPROPERTIES ('primary-key' = 'id', 'bucket' = '2'"
                  f"{unshuffled})")

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        (spark.read.parquet(batch).withColumnRenamed("op", "_row_kind")
         .write.format("managed").mode("append").save(f"bench.{t}"))

    def compact(self, spark: Any, t: str) -> None:
        spark.sql(f"CALL managed.system.compact(table => 'bench.{t}')").collect()

    def stream_upsert(self, spark: Any, t: str, batches: Any, checkpoint: str) -> Any:
        return (batches.withColumnRenamed("op", "_row_kind").writeStream.format("managed")
                .option("checkpointLocation", checkpoint).trigger(availableNow=True).start(f"bench.{t}"))

    def commit_files(self, t: str) -> str:
        return str(self.work / "managed" / "bench.db" / t / "snapshot" / "snapshot-*")

    def changes(self, spark: Any, t: str) -> Any:
        return (spark.readStream.format("managed").option("scan", "latest").option("changelog.normalize", "false")
                .load(f"bench.{t}"))


class Paimon(System):
    key = "paimon"
    with_op: set[str] = set()
    upsert_form = "INSERT INTO a table with 'rowkind.field' = 'op'"
    stream_form = "writeStream.format('paimon'), 'rowkind.field' = 'op'"
    changes_form = "no changelog producer: the records as written (+I/+U/-D)"

    def conf(self) -> dict[str, str]:
        sys.path.insert(0, str(ROOT / "scripts" / "paimon"))
        from build import jar_path   # type: ignore[import-not-found]

        return {"spark.jars": str(jar_path()),
                "spark.sql.catalog.paimon": "org.apache.paimon.spark.SparkCatalog",
                "spark.sql.catalog.paimon.warehouse": f"file:{self.work / 'paimon'}",
                "spark.sql.extensions": "org.apache.paimon.spark.extensions.PaimonSparkSessionExtensions"}

    def name(self, t: str) -> str:
        return f"paimon.bench.{t}"

    def create(self, spark: Any, t: str, changes: bool, bulk: bool = False) -> None:
        spark.sql("CREATE DATABASE IF NOT EXISTS paimon.bench")
        if changes:
            self.with_op.add(t)
        op = ", op STRING" if changes else ""
        kind = ", 'rowkind.field' = 'op'" if changes else ""
        spark.sql(f"CREATE TABLE {self.name(t)} ({DDL}{op}) "
                  f"TBLPROPERTIES ('primary-key' = 'id', 'bucket' = '2'{kind})")

    def _op(self, t: str) -> str:
        return ", '+I' AS op" if t in self.with_op else ""

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        spark.read.parquet(batch).createOrReplaceTempView("batch")
        spark.sql(f"INSERT INTO {self.name(t)} SELECT {COLUMNS}, op FROM batch")

    def compact(self, spark: Any, t: str) -> None:
        spark.sql(f"CALL paimon.sys.compact(table => 'bench.{t}')").collect()

    def stream_upsert(self, spark: Any, t: str, batches: Any, checkpoint: str) -> Any:
        return (batches.writeStream.format("paimon").option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start(str(self.work / "paimon" / "bench.db" / t)))

    def commit_files(self, t: str) -> str:
        return str(self.work / "paimon" / "bench.db" / t / "snapshot" / "snapshot-*")

    def changes(self, spark: Any, t: str) -> Any:
        return (spark.readStream.format("paimon").option("scan.mode", "latest")
                .load(str(self.work / "paimon" / "bench.db" / t)))


class Delta(System):
    key = "delta"
    upsert_form = "MERGE INTO"
    stream_form = "foreachBatch + MERGE INTO"
    changes_form = "change data feed: with the old rows (update_preimage)"

    def conf(self) -> dict[str, str]:
        from tablestore.spark.delta import delta_conf

        return {**delta_conf(), "spark.sql.warehouse.dir": str(self.work / "delta")}

    def name(self, t: str) -> str:
        return f"bench.{t}"

    def create(self, spark: Any, t: str, changes: bool, bulk: bool = False) -> None:
        spark.sql("CREATE DATABASE IF NOT EXISTS bench")
        spark.sql(f"CREATE TABLE {self.name(t)} ({DDL}) USING delta")

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        spark.read.parquet(batch).createOrReplaceTempView("batch")
        self._merge(spark, t, "batch")

    def _merge(self, spark: Any, t: str, view: str) -> None:
        spark.sql(f"MERGE INTO {self.name(t)} t USING {view} s ON t.id = s.id "
                  "WHEN MATCHED AND s.op = '-D' THEN DELETE "
                  "WHEN MATCHED THEN UPDATE SET a = s.a, b = s.b, c = s.c "
                  "WHEN NOT MATCHED AND s.op <> '-D' THEN INSERT (id, a, b, c) VALUES (s.id, s.a, s.b, s.c)")

    def compact(self, spark: Any, t: str) -> None:
        spark.sql(f"OPTIMIZE {self.name(t)}").collect()

    def stream_upsert(self, spark: Any, t: str, batches: Any, checkpoint: str) -> Any:
        def merge(df: Any, _: int) -> None:
            df.createOrReplaceTempView("micro")
            self._merge(df.sparkSession, t, "micro")

        return (batches.writeStream.foreachBatch(merge).option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start())

    def feed(self, spark: Any, t: str) -> None:
        spark.sql(f"ALTER TABLE {self.name(t)} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")

    def commit_files(self, t: str) -> str:
        return str(self.work / "delta" / "bench.db" / t / "_delta_log" / "*.json")

    def changes(self, spark: Any, t: str) -> Any:
        return spark.readStream.format("delta").option("readChangeFeed", "true").table(self.name(t))


class Parquet(System):
    """Spark's own Parquet files: the floor of every write and read (no keys, no upserts, no compaction)."""
    key = "parquet"
    upsert_form = "appended as files (no upsert: the floor)"
    stream_form = "files appended by writeStream (no upsert: the floor)"
    changes_form = "a file stream of the appended files"

    def name(self, t: str) -> str:
        return f"parquet.`{self.work / 'parquet' / t}`"

    def create(self, spark: Any, t: str, changes: bool, bulk: bool = False) -> None:
        pass

    def insert(self, spark: Any, t: str, view: str) -> None:
        spark.table(view).select("id", "a", "b", "c").write.mode("append").parquet(str(self.work / "parquet" / t))

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        spark.read.parquet(batch).drop("op").write.mode("append").parquet(str(self.work / "parquet" / t))

    def compact(self, spark: Any, t: str) -> None:
        raise NotImplementedError

    def stream_upsert(self, spark: Any, t: str, batches: Any, checkpoint: str) -> Any:
        return (batches.drop("op").writeStream.format("parquet").option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start(str(self.work / "parquet" / t)))

    def feed(self, spark: Any, t: str) -> None:
        (spark.createDataFrame([], "id BIGINT, a BIGINT, b DOUBLE, c STRING")
         .write.mode("append").parquet(str(self.work / "parquet" / t)))

    def commit_files(self, t: str) -> str:
        return str(self.work / "parquet" / t / "_SUCCESS")   # rewritten by each append's commit

    def changes(self, spark: Any, t: str) -> Any:
        return (spark.readStream.schema("id BIGINT, a BIGINT, b DOUBLE, c STRING")
                .parquet(str(self.work / "parquet" / t)))


SYSTEMS: dict[str, type[System]] = {s.key: s for s in (Tablestore, Paimon, Delta, Parquet)}


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


READS = 5
"""Reads run this many times, the best kept (the first read of a table also pays for opening it, and the machine's
load drifts: queries of tens of milliseconds moved by 20-30% between runs with 3)."""
BULK_ROUNDS = 3
"""The bulk insert runs this many times, each into a new table, the median kept (a single timed write of 2-3 s moved
by 10-15% between runs); the upserts, the compaction and the streaming write change one table and run once."""


def _best(run: Callable[[], Any]) -> float:
    return min(_timed(run) for _ in range(READS))


def _answer(spark: Any, sql_from: str) -> list[int]:
    row = spark.sql(f"SELECT count(*), coalesce(sum(a), 0) FROM {sql_from}").collect()[0]
    return [int(row[0]), int(row[1])]


def _noop(spark: Any, query: str) -> None:
    spark.sql(query).write.format("noop").mode("overwrite").save()


def run(system: System, data: Path, truth: dict[str, Any], timings: dict[str, Any], prefix: str = "",
        commits: int = COMMITS) -> None:
    """Every workload once on fresh tables named with `prefix` (the warm-up pass uses its own)."""
    spark = system.session()
    spark.sparkContext.setLogLevel("ERROR")
    spark.read.parquet(str(data / "bulk.parquet")).createOrReplaceTempView("bulk_src")
    spark.read.parquet(str(data / "base.parquet")).createOrReplaceTempView("base_src")
    batches = sorted(str(p) for p in (data / "batches").glob("*.parquet"))
    bound = truth["range_bound"]
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
    bulk_insert("bulk insert", bulk, system.bulk_form, unshuffled=True)
    if system.key == "tablestore":   # its default too: shuffled by bucket, one writer (and run) per bucket
        bulk_insert("bulk insert, shuffled by bucket", f"{bulk}s",
                    "SQL INSERT, 'sink.shuffle-by-bucket' = 'true' (the default)", unshuffled=False)

    system.create(spark, up, changes=True)
    system.insert(spark, up, "base_src")
    def upserts() -> None:
        for b in batches:
            system.upsert(spark, up, b)

    record("upserts", _timed(upserts), truth["changes"], system.upsert_form)
    final = system.name(up)
    if system.key != "parquet":
        checks["upserts"] = _answer(spark, final) == truth["final"]
    else:   # the floor has no upserts: its reads read the final rows written as plain Parquet
        final = f"parquet.`{data / 'final.parquet'}`"
    record("scan", _best(lambda: _noop(spark, f"SELECT {COLUMNS} FROM {final}")), truth["final"][0])
    record("1% key range", _best(lambda: _noop(spark, f"SELECT {COLUMNS} FROM {final} WHERE id < {bound}")),
           truth["range"][0])
    checks["1% key range"] = _answer(spark, f"{final} WHERE id < {bound}") == truth["range"]
    if system.key != "parquet":
        record("full compaction", _timed(lambda: system.compact(spark, up)), truth["final"][0])
        checks["full compaction"] = _answer(spark, final) == truth["final"]
        record("scan after compaction", _best(lambda: _noop(spark, f"SELECT {COLUMNS} FROM {final}")),
               truth["final"][0])
        record("1% range after compaction",
               _best(lambda: _noop(spark, f"SELECT {COLUMNS} FROM {final} WHERE id < {bound}")), truth["range"][0])
        checks["range after compaction"] = _answer(spark, f"{final} WHERE id < {bound}") == truth["range"]

    system.create(spark, st, changes=True)
    system.insert(spark, st, "base_src")
    stream = (spark.readStream.schema("id BIGINT, a BIGINT, b DOUBLE, c STRING, op STRING")
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
    latency(system, spark, f"{prefix}lat", data, timings, commits)
    timings["_checks"] = checks
    timings["_spark"] = spark.version


def main() -> None:
    key, data, out, warm = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    commits = int(sys.argv[5]) if len(sys.argv) > 5 else COMMITS
    truth = json.loads((data / "truth.json").read_text())
    warm_truth = json.loads((warm / "truth.json").read_text())
    system = SYSTEMS[key](data / f"work-{key}")
    warm_up: dict[str, Any] = {}
    run(system, warm, warm_truth, warm_up, prefix="w", commits=5)   # JIT, jars, Python workers: the timed pass
    # runs warm
    timings: dict[str, Any] = {}
    run(system, data, truth, timings, commits=commits)
    timings["_warm_checks"] = warm_up["_checks"]
    out.write_text(json.dumps(timings, indent=2))


if __name__ == "__main__":
    main()
