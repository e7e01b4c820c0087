"""Other engines reading our tables (issue 49): each reader's scan of a managed table's Delta or Iceberg view
against its scan of a table it wrote itself holding the same live rows, one run.

    python bench/views_read_bench.py [--keys 1000000] [--batches 10] [--repeat 5] [--no-spark]

The managed table: the shape of bench/spark_dv_bench.py (8 columns: BIGINTs, a DOUBLE, STRINGs, a TIMESTAMP),
`--keys` keys then `--batches` upsert batches (30% updates, 5% deletes), bucket 4, deletion vectors on, both views
on. The native tables: its live rows written once by delta-rs (`write_deltalake`) and by pyiceberg (a SQLite
catalog: needs `sqlalchemy`), each a fresh, fully compacted table: the best case a reader meets.
Readers (best of `--repeat`, ours and native interleaved; the first run too):
- delta-rs: `DeltaTable(path).scan()` read to Arrow (its `to_pyarrow_table` refuses deletion vectors);
- pyiceberg: `StaticTable.from_metadata(...).scan().to_arrow()` against its own table's scan;
- delta-spark 4.4 (unless `--no-spark`): `spark.read.format("delta").load(path)`, a count and a sum of the hash of
  every column (delta-spark refuses the `noop` sink on a table with deletion vectors).
Every reader's row count is checked. Prints a table and writes bench/out/views_read_bench.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import tablestore  # noqa: E402
from spark_dv_bench import SCHEMA, batches  # noqa: E402

OUT = HERE / "out"


def interleaved(repeat: int, runs: dict[str, Callable[[], int]]) -> dict[str, dict[str, float]]:
    times: dict[str, list[float]] = {k: [] for k in runs}
    counts: dict[str, int] = {}
    for _ in range(repeat):
        for name, run in runs.items():
            began = time.perf_counter()
            counts[name] = run()
            times[name].append(time.perf_counter() - began)
    assert len(set(counts.values())) == 1, counts
    return {k: {"best_s": min(v), "first_s": v[0]} for k, v in times.items()}


def delta_rs(path: str) -> int:
    import deltalake

    return pa.RecordBatchReader.from_stream(deltalake.DeltaTable(path).scan()).read_all().num_rows


def iceberg_metadata(table_path: str) -> str:
    meta = Path(table_path) / "metadata"
    version = (meta / "version-hint.text").read_text().strip()
    return str(meta / f"v{version}.metadata.json")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-spark", action="store_true")
    args = ap.parse_args()
    import deltalake
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import StaticTable

    work = Path(tempfile.mkdtemp(prefix="tablestore-views-bench-"))
    cat = tablestore.Catalog(str(work / "wh"))
    cat.create_database("db")
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={
        "bucket": "4", "deletion-vectors.enabled": "true", "metadata.delta.enabled": "true",
        "metadata.iceberg.storage": "table-location", "log.system": "none"})
    init, upserts = batches(args.keys, args.batches)
    t.write(init)
    for b in upserts:
        t.write(b)
    live = t.read()
    files = t.files()
    native_delta = str(work / "native_delta")
    deltalake.write_deltalake(native_delta, live)
    icat = SqlCatalog("bench", uri=f"sqlite:///{work / 'iceberg.db'}", warehouse=f"file://{work / 'iceberg'}")
    icat.create_namespace("db")
    native_iceberg = icat.create_table("db.t", schema=live.schema)
    native_iceberg.append(live)
    ours_iceberg = iceberg_metadata(t.path)

    results: dict[str, Any] = {
        "keys": args.keys, "batches": args.batches, "live_rows": live.num_rows, "files": len(files),
        "deleted_rows": sum(int(f["deleted_row_count"]) for f in files),  # type: ignore[call-overload]
        "delta-rs": interleaved(args.repeat, {"ours": lambda: delta_rs(t.path), "native": lambda: delta_rs(native_delta)}),
        "pyiceberg": interleaved(args.repeat, {
            "ours": lambda: StaticTable.from_metadata(ours_iceberg).scan().to_arrow().num_rows,
            "native": lambda: icat.load_table("db.t").scan().to_arrow().num_rows}),
    }
    if not args.no_spark:
        from tablestore.spark import session
        from tablestore.spark.delta import delta_conf

        spark = session(str(work / "wh"), master="local[2]", **{
            "spark.ui.enabled": "false", "spark.driver.memory": "4g", **delta_conf()})
        spark.sparkContext.setLogLevel("ERROR")
        if "delta" not in spark.conf.get("spark.sql.extensions", ""):
            raise SystemExit("the Spark session has no Delta Lake (delta-spark and its jars are needed)")

        def delta_spark(path: str) -> Callable[[], int]:
            def run() -> int:
                # every column decoded (delta-spark refuses the noop sink on a table with deletion vectors:
                # "Cannot work with a non-pinned table snapshot of the TahoeFileIndex")
                row = spark.read.format("delta").load(path).selectExpr("count(*)", "sum(hash(*))").collect()[0]
                return int(row[0])
            return run

        for path in (t.path, native_delta):
            assert spark.read.format("delta").load(path).count() == live.num_rows, path
        results["delta-spark"] = interleaved(args.repeat, {"ours": delta_spark(t.path),
                                                           "native": delta_spark(native_delta)})
        spark.stop()

    print(f"live rows {live.num_rows:,} in {len(files)} files, {results['deleted_rows']:,} rows deleted by vectors")
    print(f"{'reader':<14}{'ours':>9}{'native':>9}{'ours/native speed':>19}{'first run':>11}")
    for reader in ("delta-rs", "pyiceberg", "delta-spark"):
        r = results.get(reader)
        if r is None:
            continue
        speed = r["native"]["best_s"] / r["ours"]["best_s"]
        first = r["native"]["first_s"] / r["ours"]["first_s"]
        print(f"{reader:<14}{r['ours']['best_s']:>8.2f}s{r['native']['best_s']:>8.2f}s{speed:>18.2f}x{first:>10.2f}x")
    OUT.mkdir(exist_ok=True)
    (OUT / "views_read_bench.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {OUT / 'views_read_bench.json'}")


if __name__ == "__main__":
    main()
