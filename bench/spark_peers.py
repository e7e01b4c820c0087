"""tablestore against Delta Lake and Apache Paimon inside Spark: the same workloads, the same data, the same
machine, one system per process, with Spark's own Parquet as the floor.

    python bench/spark_peers.py [--scale 1] [--shape narrow4|wide8] [--workloads bulk,upserts,stream,latency]
        [--systems tablestore,tablestore-dv,paimon,paimon-dv,delta,parquet]

Set-up (cached, once): a PySpark 4.1.2 environment (`.venv-spark-4.1.2`, the Spark Paimon's 4.1 build is made for;
Paimon 2.0 runs on 4.1 only), Paimon's Spark runtime built from its source (`scripts/paimon/build.py`, 8-15
minutes), Delta's jars for Spark 4.1 from Maven Central (`tablestore.spark.delta`).

Systems: `tablestore-dv` and `paimon-dv` are tablestore and Paimon with `'deletion-vectors.enabled' = 'true'`.
Shapes (`bench/peers_shapes.py`): `narrow4` (the default: `id BIGINT, a BIGINT, b DOUBLE, c STRING`, 2 buckets) and
`wide8` (issue 49's, also `bench/spark_dv_bench.py`'s: `id` BIGINT key, two more BIGINTs, a DOUBLE, three STRINGs, a
TIMESTAMP, 4 buckets; at scale 1 200k keys and 10 upsert batches of 100k; upserts and reads only).

Workloads, at scale 1 (`--scale` multiplies every row count), each system in a local[2] session with a 4 GB driver:
- bulk insert: 5M rows by SQL `INSERT INTO ... SELECT` from a Parquet view (tablestore: into a table with
  `sink.shuffle-by-bucket` = false, and again into one with the default, shuffled by bucket);
- upserts: 10 batches of 500k changes (30% updates, 5% deletes, 65% inserts) into a 1M-row table, each system its
  fastest way (named in the output; `bench/peers_systems.py`);
- reads of the upserted table: a scan (every column into Spark's `noop` sink), a SQL aggregate over every column
  (count, sums, maxima), the 1% key range (narrow4: `WHERE id < bound` into `noop`; wide8: `count(*), sum(a)` of
  `id BETWEEN lo AND hi`, collected);
- full compaction, then the reads again;
- streaming upserts: the same 10 batches as 10 micro-batches (Delta: foreachBatch + MERGE, as its users do);
- latency from a commit (a write of 1,000 rows, 500 updates spread over the table and 500 new keys) into a table
  of the base's 1M rows to a streaming reader of the table's changes having collected them (tablestore:
  `readStream.format("managed")` of a table without a log, `changelog.normalize` = false: the records as written;
  Paimon: its streaming source, scan.mode latest; Delta: its change data feed; Parquet: a file stream), median of
  15 (`--commits`; a median of 5 moved by 20-30% between runs); the clock starts at the commit file's
  modification time, and a second figure starts it when the write returns (`bench/peers_latency.py`).
Each system first runs every workload on a small data set (the warm-up pass: JIT, jars, Python workers), then the
timed pass. Each read runs 5 times in a new session of that warm JVM (`bench/peers_workloads.py`): its first run,
the table's first query in that session, and the best of 5 are both reported. The bulk insert runs 3 times, each
into a new table, the median kept (the other writes change one table: once). Every answer is checked (count and
sum of a column, or the collected aggregate, against the generator's truth) and a wrong one fails the run. Prints
one table (seconds; ours/peer: the peer's seconds / ours, tablestore against the peers without deletion vectors,
tablestore-dv against Paimon with and without) and writes bench/out/spark_peers.json and .png (wide8:
spark_peers_wide8.json and .png). Not a test: figures depend on the machine's load.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from peers_latency import COMMITS   # bench/ is this script's directory
from peers_shapes import SHAPES
from peers_workloads import AFTER_COMPACTION, WORKLOADS

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
SPARK = "4.1.2"
VENV = ROOT / f".venv-spark-{SPARK}"
SYSTEMS = ("tablestore", "tablestore-dv", "paimon", "paimon-dv", "delta", "parquet")
OURS = ("tablestore", "tablestore-dv")


def order(shape: str) -> list[str]:
    """The workloads in the order they run: each read's best of 5, then its first run."""
    reads = list(SHAPES[shape].reads)
    return ["bulk insert", "bulk insert, shuffled by bucket", "upserts",
            *[f"{r}{first}" for r in reads for first in ("", " (first run)")], "full compaction",
            *[f"{AFTER_COMPACTION[r]}{first}" for r in reads for first in ("", " (first run)")],
            "streaming upserts (10 micro-batches)", "commit to change stream (median)",
            "write return to change stream (median)"]


def pairs(systems: list[str]) -> list[tuple[str, str]]:
    """(ours, peer) of the printed ratios: tablestore against every peer without deletion vectors, tablestore-dv
    against Paimon with and without them."""
    out = [("tablestore", p) for p in systems if p not in OURS and not p.endswith("-dv")]
    return [*out, *[("tablestore-dv", p) for p in ("paimon-dv", "paimon")]]


def setup(systems: list[str]) -> Path:
    """The PySpark 4.1.2 environment, Paimon's jar, Delta's jars; the environment's Python."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import dev   # type: ignore[import-not-found]

    python = dev._venv(VENV, [*dev.EDITABLE, ".[spark,test]", f"pyspark=={SPARK}"])
    if any(s.startswith("paimon") for s in systems):
        subprocess.run([str(python), str(ROOT / "scripts" / "paimon" / "build.py")], check=True)
    if "delta" in systems:
        subprocess.run([str(python), "-c", "from tablestore.spark.delta import delta_jars; delta_jars()"],
                       check=True, cwd=ROOT)
    return python


def generate(into: Path, shape: str, scale: float, seed: int = 7) -> dict[str, Any]:
    """The data files and the answers every system must give (`truth.json`): `bench/peers_shapes.py`."""
    (into / "batches").mkdir(parents=True, exist_ok=True)
    return SHAPES[shape].generate(into, scale, seed)


def _ratio(theirs: float | None, ours: float | None) -> str:
    return "" if not theirs or not ours or theirs <= 0 or ours <= 0 else f"{theirs / ours:.2f}x"


def report(results: dict[str, dict[str, Any]], scale: float, shape: str) -> dict[str, Any]:
    systems = [s for s in SYSTEMS if s in results]
    shown = [(o, p) for o, p in pairs(systems) if o in results and p in results]
    header = ["workload", *[f"{s} s" for s in systems], *[f"{o}/{p}" for o, p in shown]]
    lines = [header]
    table: dict[str, Any] = {}
    for w in order(shape):
        secs = {s: results[s].get(w, {}).get("seconds") for s in systems}
        if all(v is None for v in secs.values()):
            continue
        table[w] = {"seconds": secs, "rows": max(results[s].get(w, {}).get("rows", 0) for s in systems),
                    "speedup": {f"{o}/{p}": (secs[p] / secs[o] if _ratio(secs[p], secs[o]) else None)
                                for o in OURS if o in systems for p in systems if p not in OURS},
                    "forms": {s: results[s].get(w, {}).get("form", "") for s in systems}}
        lines.append([w, *[f"{secs[s]:.3f}" if secs[s] is not None else "-" for s in systems],
                      *[_ratio(secs[p], secs[o]) for o, p in shown]])
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    print(f"\nshape {shape}, scale {scale}, PySpark {results[systems[0]].get('_spark')}, local[2]; "
          "ours/peer = the peer's seconds / ours (above 1: ours faster)")
    for r in lines:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))
    for s in systems:
        forms = {w: v["form"] for w, v in results[s].items() if not w.startswith("_") and v.get("form")}
        print(f"{s}: " + "; ".join(f"{w}: {f}" for w, f in forms.items()))
    return table


def chart(table: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    systems = list(next(iter(table.values()))["seconds"])
    workloads = [w for w in table if not w.endswith("(first run)")]
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        values = [table[w]["seconds"].get(s) or 0 for w in workloads]
        ax.bar([x + i * width for x in range(len(workloads))], values, width, label=s)
    ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(workloads))],
                  [w.replace(" (10 micro-batches)", "") for w in workloads], rotation=20, ha="right")
    ax.set_ylabel("seconds (lower is better)")
    ax.set_title("tablestore, Paimon, Delta and Spark's Parquet in Spark (bench/spark_peers.py)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument("--commits", type=int, default=COMMITS,
                    help="commits of the latency workload, whose median is reported (default %(default)s)")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="narrow4",
                    help="the table: narrow4 (4 columns) or wide8 (8 columns; upserts and reads only)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS),
                    help="a subset of %(default)s (upserts: the upserts, reads, compaction and reads again)")
    ap.add_argument("--keep", action="store_true", help="keep the data and tables (printed) for a look")
    args = ap.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in systems if s not in SYSTEMS]
    if unknown:
        ap.error(f"unknown systems {unknown}: choose from {', '.join(SYSTEMS)}")
    workloads = [w for w in args.workloads.split(",") if w in WORKLOADS and (SHAPES[args.shape].bulk or w == "upserts")]
    name = "spark_peers" if args.shape == "narrow4" else f"spark_peers_{args.shape}"
    python = setup(systems)
    work = Path(tempfile.mkdtemp(prefix="spark-peers-"))
    try:
        generate(work / "data", args.shape, args.scale)
        generate(work / "warm", args.shape, min(args.scale, 1.0) * 0.02, seed=8)
        results: dict[str, dict[str, Any]] = {}
        for s in systems:
            out = work / f"{s}.json"
            print(f"running {s} ...", flush=True)
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
            env["PYTHONPATH"] = str(ROOT)   # this tree's code, in the driver and its Python workers alike (a copy
            # of the tree runs its own code, not the one the environment was installed from)
            subprocess.run([str(python), str(Path(__file__).with_name("peers_systems.py")), s, str(work / "data"),
                            str(out), str(work / "warm"), "--commits", str(args.commits), "--shape", args.shape,
                            "--workloads", ",".join(workloads)], check=True, env=env, cwd=ROOT)
            results[s] = json.loads(out.read_text())
            wrong = [k for k, ok in {**results[s]["_checks"], **results[s]["_warm_checks"]}.items() if not ok]
            if wrong:
                sys.exit(f"{s} gave wrong answers for: {', '.join(wrong)}")
        table = report(results, args.scale, args.shape)
        OUT.mkdir(exist_ok=True)
        (OUT / f"{name}.json").write_text(json.dumps(
            {"shape": args.shape, "scale": args.scale, "spark": SPARK, "cores": 2, "workloads": workloads,
             "table": table, "raw": results}, indent=2))
        chart(table, OUT / f"{name}.png")
        print(f"wrote {OUT / f'{name}.json'} and {OUT / f'{name}.png'}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
