"""Where the time of `bench/spark_peers.py`'s wide8 reads goes (not a test): in ONE local[2] session holding both
catalogs, the wide8 shape's tables of tablestore and Paimon, with and without deletion vectors, and a tablestore
table of the same rows with the TIMESTAMP column stored as BIGINT microseconds (`nots`: what the timestamp costs),
upserted and fully compacted the peers' way (`bench/peers_systems.py`); then for each read after compaction (and
the range before it, `--phases`): planning alone (`executedPlan()` of a new query: analysis, optimization, the
scan's planning, Python planner workers included), the whole query, each the first run in a new session and the
best of 5, and the scan node Spark planned.

    python bench/peers_breakdown.py [--scale 0.5]      # with .venv-spark-4.1.2's python, after spark_peers' set-up

Prints a table and writes bench/out/peers_breakdown.json.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from peers_shapes import SHAPES, Wide8  # noqa: E402
from peers_systems import COMMON_CONF, Paimon, PaimonDV, Tablestore, TablestoreDV  # noqa: E402


class Wide8NoTs(Wide8):
    key = "wide8-nots"
    ddl = Wide8.ddl.replace("ts TIMESTAMP", "ts BIGINT")


def _no_ts(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    t = pq.read_table(src)
    i = t.schema.get_field_index("ts")
    pq.write_table(t.set_column(i, "ts", pc.cast(t["ts"], pa.int64())), dst / src.name)


def _best(run: Callable[[], Any], repeat: int = 5) -> tuple[float, float]:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return times[0], min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=0.5)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="peers-breakdown-"))
    data, plain = work / "data", work / "nots"
    (data / "batches").mkdir(parents=True)
    truth = SHAPES["wide8"].generate(data, args.scale, 7)
    for f in [data / "base.parquet", *sorted((data / "batches").glob("*.parquet"))]:
        _no_ts(f, plain / f.parent.relative_to(data) if f.parent != data else plain)
    wide, nots = SHAPES["wide8"], Wide8NoTs()
    systems = {"tablestore": Tablestore(work / "t", wide), "tablestore-dv": TablestoreDV(work / "t", wide),
               "tablestore nots": Tablestore(work / "t", nots), "paimon": Paimon(work / "p", wide),
               "paimon-dv": PaimonDV(work / "p", wide)}
    import tablestore.spark

    conf = {k: v for k, v in COMMON_CONF.items() if not k.startswith("spark.driver.")}
    conf["spark.driver.memory"] = "4g"
    spark = tablestore.spark.local_session("peers-breakdown", conf={
        **conf, **systems["paimon"].conf(), "spark.sql.catalog.managed.warehouse": str(work / "t" / "managed")})
    spark.sparkContext.setLogLevel("ERROR")
    write_s: dict[str, float] = {}
    for name, system in systems.items():
        src = plain if system.shape is nots else data
        t = name.replace(" ", "_").replace("-", "_")
        spark.read.parquet(str(src / "base.parquet")).createOrReplaceTempView("base_src")
        system.create(spark, t, changes=True)
        system.insert(spark, t, "base_src")
        began = time.perf_counter()
        for b in sorted((src / "batches").glob("*.parquet")):
            system.upsert(spark, t, str(b))
        write_s[name] = time.perf_counter() - began
    reads = wide.reads
    results: dict[str, Any] = {"scale": args.scale, "live_rows": truth["final"][0], "upserts_s": write_s}
    for phase in ("before compaction", "after compaction"):
        if phase == "after compaction":
            for name, system in systems.items():
                system.compact(spark, name.replace(" ", "_").replace("-", "_"))
        for read, (sql, _) in reads.items():
            if phase == "before compaction" and read == "scan":
                continue
            for name, system in systems.items():
                query = sql.format(t=system.name(name.replace(" ", "_").replace("-", "_")), lo=truth["lo"],
                                   hi=truth["hi"])
                if read == "scan":
                    def run(s: Any, q: str = query) -> Any:
                        return s.sql(q).write.format("noop").mode("overwrite").save()
                else:
                    def run(s: Any, q: str = query) -> Any:
                        return s.sql(q).collect()
                session = spark.newSession()
                session.sql("SELECT 1").collect()
                first, best = _best(lambda: run(session))
                planner = spark.newSession()
                planner.sql("SELECT 1").collect()
                plan_first, plan_best = _best(lambda: planner.sql(query)._jdf.queryExecution().executedPlan())
                plan = str(spark.sql(query)._jdf.queryExecution().executedPlan().toString())
                scan = [re.sub(r"\s+", " ", ln.strip())[:160] for ln in plan.splitlines()
                        if "Scan" in ln or "BatchScan" in ln]
                results[f"{phase}: {read}: {name}"] = {
                    "first_s": first, "best_s": best, "plan_first_s": plan_first, "plan_best_s": plan_best,
                    "scan_node": scan}
                print(f"{phase:18} {read:13} {name:16} query first {first:6.3f} best {best:6.3f}  "
                      f"planning first {plan_first:6.3f} best {plan_best:6.3f}  {scan[:1]}", flush=True)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    out = ROOT / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "peers_breakdown.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {out / 'peers_breakdown.json'}")


if __name__ == "__main__":
    main()
