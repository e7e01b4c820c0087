"""The systems `bench/spark_peers.py` races, each with its fastest form of every workload, in one Spark session of
its own process (`python bench/peers_systems.py SYSTEM DATA_DIR RESULT.json WARM_DIR [--shape ...]`; the workloads:
`bench/peers_workloads.py`).

Every table has the columns of the shape (`bench/peers_shapes.py`: `narrow4`, `id BIGINT NOT NULL, a BIGINT, b DOUBLE,
c STRING`, or `wide8`) and primary key `id` where the system has keys (Paimon and tablestore: the shape's fixed
buckets, 2 or 4; Delta and Parquet: none). `tablestore-dv` and `paimon-dv` are the same with
`'deletion-vectors.enabled' = 'true'` (both systems' name for it). Upserts come as Parquet batches with a column `op`
(`+I`, `+U`, `-D`), and each system applies them its fastest way:
- tablestore: the batch as a `_row_kind` DataFrame, `df.write.format("managed")`;
- Paimon: `INSERT INTO` a table whose `rowkind.field` is `op` (one commit per batch, deletes included);
- Delta: `MERGE INTO` (what Delta's users do; Delta has no changelog write);
- Parquet (the floor): the batch appended as files, with no upsert semantics at all.
Compaction is each system's full compaction (`CALL managed.system.compact`, `CALL paimon.sys.compact`, `OPTIMIZE`).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers_latency import COMMITS  # noqa: E402  (bench/ is this script's directory)
from peers_shapes import SHAPES, Shape  # noqa: E402


class System:
    """One system's session and statements; `t` is a table's short name, `name(t)` its name in SQL."""
    key = ""
    bulk_form = "SQL INSERT"
    upsert_form = ""
    stream_form = ""
    changes_form = ""

    properties = ""   # more table properties, after a comma

    def __init__(self, work: Path, shape: Shape) -> None:
        self.work = work
        self.shape = shape

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
        spark.sql(f"INSERT INTO {self.name(t)} SELECT {self.shape.columns}{self._op(t)} FROM {view}")

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
        spark.sql(f"CREATE TABLE {self.name(t)} ({self.shape.ddl}) TBLPROPERTIES ('primary-key' = 'id', "
                  f"'bucket' = '{self.shape.bucket}'{unshuffled}{self.properties})")

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
        spark.sql(f"CREATE TABLE {self.name(t)} ({self.shape.ddl}{op}) "
                  f"TBLPROPERTIES ('primary-key' = 'id', 'bucket' = '{self.shape.bucket}'{kind}{self.properties})")

    def _op(self, t: str) -> str:
        return ", '+I' AS op" if t in self.with_op else ""

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        spark.read.parquet(batch).createOrReplaceTempView("batch")
        spark.sql(f"INSERT INTO {self.name(t)} SELECT {self.shape.columns}, op FROM batch")

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
        spark.sql(f"CREATE TABLE {self.name(t)} ({self.shape.ddl}) USING delta")

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        spark.read.parquet(batch).createOrReplaceTempView("batch")
        self._merge(spark, t, "batch")

    def _merge(self, spark: Any, t: str, view: str) -> None:
        columns = self.shape.columns.split(", ")
        spark.sql(f"MERGE INTO {self.name(t)} t USING {view} s ON t.id = s.id "
                  "WHEN MATCHED AND s.op = '-D' THEN DELETE "
                  f"WHEN MATCHED THEN UPDATE SET {', '.join(f'{c} = s.{c}' for c in columns[1:])} "
                  f"WHEN NOT MATCHED AND s.op <> '-D' THEN INSERT ({', '.join(columns)}) "
                  f"VALUES ({', '.join(f's.{c}' for c in columns)})")

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
        spark.table(view).select(*self.shape.columns.split(", ")).write.mode("append").parquet(str(self.work / "parquet" / t))

    def upsert(self, spark: Any, t: str, batch: str) -> None:
        spark.read.parquet(batch).drop("op").write.mode("append").parquet(str(self.work / "parquet" / t))

    def compact(self, spark: Any, t: str) -> None:
        raise NotImplementedError

    def stream_upsert(self, spark: Any, t: str, batches: Any, checkpoint: str) -> Any:
        return (batches.drop("op").writeStream.format("parquet").option("checkpointLocation", checkpoint)
                .trigger(availableNow=True).start(str(self.work / "parquet" / t)))

    def feed(self, spark: Any, t: str) -> None:
        (spark.createDataFrame([], self.shape.ddl.replace(" NOT NULL", ""))
         .write.mode("append").parquet(str(self.work / "parquet" / t)))

    def commit_files(self, t: str) -> str:
        return str(self.work / "parquet" / t / "_SUCCESS")   # rewritten by each append's commit

    def changes(self, spark: Any, t: str) -> Any:
        return (spark.readStream.schema(self.shape.ddl.replace(" NOT NULL", ""))
                .parquet(str(self.work / "parquet" / t)))


class TablestoreDV(Tablestore):
    key = "tablestore-dv"
    properties = ", 'deletion-vectors.enabled' = 'true'"


class PaimonDV(Paimon):
    key = "paimon-dv"
    properties = ", 'deletion-vectors.enabled' = 'true'"


SYSTEMS: dict[str, type[System]] = {s.key: s for s in (Tablestore, TablestoreDV, Paimon, PaimonDV, Delta, Parquet)}


def main() -> None:
    from peers_workloads import WORKLOADS, run

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("system", choices=sorted(SYSTEMS))
    ap.add_argument("data", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("warm", type=Path)
    ap.add_argument("--commits", type=int, default=COMMITS)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="narrow4")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    args = ap.parse_args()
    truth = json.loads((args.data / "truth.json").read_text())
    warm_truth = json.loads((args.warm / "truth.json").read_text())
    system = SYSTEMS[args.system](args.data / f"work-{args.system}", SHAPES[args.shape])
    workloads = args.workloads.split(",")
    warm_up: dict[str, Any] = {}
    # JIT, jars, Python workers: the timed pass runs warm (its reads' first runs: each a table's first query in a new
    # session of the warm JVM)
    run(system, args.warm, warm_truth, warm_up, workloads, prefix="w", commits=5, repeat=2)
    timings: dict[str, Any] = {}
    run(system, args.data, truth, timings, workloads, commits=args.commits)
    timings["_warm_checks"] = warm_up["_checks"]
    args.out.write_text(json.dumps(timings, indent=2))


if __name__ == "__main__":
    main()
