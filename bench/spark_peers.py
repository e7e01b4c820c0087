"""tablestore against Delta Lake and Apache Paimon inside Spark: the same workloads, the same data, the same
machine, one system per process, with Spark's own Parquet as the floor.

    python bench/spark_peers.py [--scale 1] [--systems tablestore,paimon,delta,parquet]

Set-up (cached, once): a PySpark 4.1.2 environment (`.venv-spark-4.1.2`, the Spark Paimon's 4.1 build is made for;
Paimon 2.0 runs on 4.1 only), Paimon's Spark runtime built from its source (`scripts/paimon/build.py`, 8-15
minutes), Delta's jars for Spark 4.1 from Maven Central (`tablestore.spark.delta`).

Workloads, at scale 1 (`--scale` multiplies every row count), each system in a local[2] session with a 4 GB driver:
- bulk insert: 5M rows by SQL `INSERT INTO ... SELECT` from a Parquet view (tablestore: into a table with
  `sink.shuffle-by-bucket` = false, and again into one with the default, shuffled by bucket);
- upserts: 10 batches of 500k changes (30% updates, 5% deletes, 65% inserts) into a 1M-row table, each system its
  fastest way (named in the output; `bench/peers_systems.py`);
- scan (every row into Spark's `noop` sink), and a 1% key range (`WHERE id < bound`), of the upserted table;
- full compaction, then the scan and the range again;
- streaming upserts: the same 10 batches as 10 micro-batches (Delta: foreachBatch + MERGE, as its users do);
- latency from a commit (a write of 1,000 rows, 500 updates spread over the table and 500 new keys) into a table
  of the base's 1M rows to a streaming reader of the table's changes having collected them (tablestore:
  `readStream.format("managed")` of a table without a log, `changelog.normalize` = false: the records as written;
  Paimon: its streaming source, scan.mode latest; Delta: its change data feed; Parquet: a file stream), median of
  15 (`--commits`; a median of 5 moved by 20-30% between runs); the clock starts at the commit file's
  modification time, and a second figure starts it when the write returns (`bench/peers_latency.py`).
Each system first runs every workload on a small data set (the warm-up pass: JIT, jars, Python workers), then the
timed pass; reads run 5 times, the best kept; the bulk insert 3 times, each into a new table, the median kept
(the other writes change one table: once). Every answer is checked (count and
sum of a column against the generator's truth) and a wrong one fails the run. Prints one table (seconds, rows/s,
tablestore's speed-up over each peer: their seconds / ours) and
writes bench/out/spark_peers.json and bench/out/spark_peers.png. Not a test: figures depend on the machine's load.
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

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from peers_latency import COMMITS   # bench/ is this script's directory

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
SPARK = "4.1.2"
VENV = ROOT / f".venv-spark-{SPARK}"
SYSTEMS = ("tablestore", "paimon", "delta", "parquet")
ORDER = ("bulk insert", "bulk insert, shuffled by bucket", "upserts", "scan", "1% key range", "full compaction",
         "scan after compaction", "1% range after compaction", "streaming upserts (10 micro-batches)",
         "commit to change stream (median)", "write return to change stream (median)")


def _rows(rng: np.random.Generator, ids: np.ndarray) -> dict[str, Any]:
    n = len(ids)
    return {"id": ids.astype(np.int64), "a": rng.integers(0, 1 << 20, n), "b": rng.random(n),
            "c": pa.array(np.char.add("v", (ids % 100_000).astype(str)))}


def generate(into: Path, scale: float, seed: int = 7) -> dict[str, Any]:
    """The data files and the answers every system must give (`truth.json`)."""
    rng = np.random.default_rng(seed)
    into.mkdir(parents=True, exist_ok=True)
    n_bulk, n_base, n_batch = int(5_000_000 * scale), int(1_000_000 * scale), int(500_000 * scale)
    bulk = pa.table(_rows(rng, rng.permutation(n_bulk)))
    pq.write_table(bulk, into / "bulk.parquet")
    base_ids = rng.permutation(n_base)
    base = _rows(rng, base_ids)
    pq.write_table(pa.table(base), into / "base.parquet")
    capacity = n_base + 10 * n_batch
    alive = np.zeros(capacity, bool)
    a = np.zeros(capacity, np.int64)
    b = np.zeros(capacity, np.float64)
    alive[base_ids] = True
    a[base_ids], b[base_ids] = base["a"], base["b"]
    next_id = n_base
    (into / "batches").mkdir(exist_ok=True)
    for i in range(10):
        live = np.flatnonzero(alive)
        n_upd, n_del = int(n_batch * 0.30), int(n_batch * 0.05)
        n_ins = n_batch - n_upd - n_del
        touched = rng.choice(live, n_upd + n_del, replace=False)
        upd, dele = touched[:n_upd], touched[n_upd:]
        ins = np.arange(next_id, next_id + n_ins)
        next_id += n_ins
        ids = np.concatenate([upd, dele, ins])
        cols = _rows(rng, ids)
        op = np.array(["+U"] * n_upd + ["-D"] * n_del + ["+I"] * n_ins)
        order = rng.permutation(len(ids))
        batch = pa.table({k: (v.take(pa.array(order)) if isinstance(v, pa.Array) else v[order])
                          for k, v in {**cols, "op": pa.array(op)}.items()})
        path = into / "batches" / f"batch-{i:02d}.parquet"
        pq.write_table(batch, path)
        # The streaming upserts read these files in modification-time order (Spark's file source, in ms), so
        # each gets its own second: small batches written within one millisecond came out of order.
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
        alive[dele] = False
        alive[np.concatenate([upd, ins])] = True
        a[upd], a[ins] = cols["a"][:n_upd], cols["a"][n_upd + n_del:]
        b[upd], b[ins] = cols["b"][:n_upd], cols["b"][n_upd + n_del:]
    final_ids = np.flatnonzero(alive)
    bound = int(next_id * 0.01)
    in_range = final_ids[final_ids < bound]
    final = pa.table({"id": final_ids.astype(np.int64), "a": a[final_ids], "b": b[final_ids],
                      "c": pa.array(np.char.add("v", (final_ids % 100_000).astype(str)))})
    pq.write_table(final, into / "final.parquet")
    truth = {"bulk": [n_bulk, int(bulk["a"].to_numpy().sum())], "changes": 10 * n_batch,
             "final": [len(final_ids), int(a[final_ids].sum())], "range_bound": bound,
             "range": [len(in_range), int(a[in_range].sum())]}
    (into / "truth.json").write_text(json.dumps(truth))
    return truth


def setup(systems: list[str]) -> Path:
    """The PySpark 4.1.2 environment, Paimon's jar, Delta's jars; the environment's Python."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import dev   # type: ignore[import-not-found]

    python = dev._venv(VENV, [*dev.EDITABLE, ".[spark,test]", f"pyspark=={SPARK}"])
    if "paimon" in systems:
        subprocess.run([str(python), str(ROOT / "scripts" / "paimon" / "build.py")], check=True)
    if "delta" in systems:
        subprocess.run([str(python), "-c", "from tablestore.spark.delta import delta_jars; delta_jars()"],
                       check=True, cwd=ROOT)
    return python


def _ratio(theirs: float | None, ours: float | None) -> str:
    return "" if not theirs or not ours or theirs <= 0 or ours <= 0 else f"{theirs / ours:.2f}x"


def report(results: dict[str, dict[str, Any]], scale: float) -> dict[str, Any]:
    systems = [s for s in SYSTEMS if s in results]
    peers = [s for s in systems if s != "tablestore"]
    header = ["workload", *[f"{s} s" for s in systems], "tablestore rows/s", *[f"vs {p}" for p in peers]]
    lines = [header]
    table: dict[str, Any] = {}
    for w in ORDER:
        secs = {s: results[s].get(w, {}).get("seconds") for s in systems}
        ours = secs.get("tablestore")
        rows = results.get("tablestore", {}).get(w, {}).get("rows", 0)
        table[w] = {"seconds": secs, "speedup": {p: (secs[p] / ours if _ratio(secs[p], ours) else None) for p in peers},
                    "forms": {s: results[s].get(w, {}).get("form", "") for s in systems}}
        lines.append([w, *[f"{secs[s]:.3f}" if secs[s] is not None else "-" for s in systems],
                      f"{rows / ours:,.0f}" if ours and ours > 0 else "-", *[_ratio(secs[p], ours) for p in peers]])
    widths = [max(len(r[i]) for r in lines) for i in range(len(header))]
    print(f"\nscale {scale}, PySpark {results[systems[0]].get('_spark')}, local[2]; speed-up = peer's seconds / ours")
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
    fig, ax = plt.subplots(figsize=(11, 5))
    width = 0.8 / len(systems)
    for i, s in enumerate(systems):
        values = [table[w]["seconds"].get(s) or 0 for w in ORDER]
        ax.bar([x + i * width for x in range(len(ORDER))], values, width, label=s)
    ax.set_xticks([x + width * (len(systems) - 1) / 2 for x in range(len(ORDER))],
                  [w.replace(" (10 micro-batches)", "") for w in ORDER], rotation=20, ha="right")
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
    ap.add_argument("--keep", action="store_true", help="keep the data and tables (printed) for a look")
    args = ap.parse_args()
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    python = setup(systems)
    work = Path(tempfile.mkdtemp(prefix="spark-peers-"))
    try:
        generate(work / "data", args.scale)
        generate(work / "warm", min(args.scale, 1.0) * 0.02, seed=8)
        results: dict[str, dict[str, Any]] = {}
        for s in systems:
            out = work / f"{s}.json"
            print(f"running {s} ...", flush=True)
            env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SPARK_HOME")}
            subprocess.run([str(python), str(Path(__file__).with_name("peers_systems.py")), s, str(work / "data"),
                            str(out), str(work / "warm"), str(args.commits)], check=True, env=env, cwd=ROOT)
            results[s] = json.loads(out.read_text())
            wrong = [k for k, ok in {**results[s]["_checks"], **results[s]["_warm_checks"]}.items() if not ok]
            if wrong:
                sys.exit(f"{s} gave wrong answers for: {', '.join(wrong)}")
        table = report(results, args.scale)
        OUT.mkdir(exist_ok=True)
        (OUT / "spark_peers.json").write_text(json.dumps(
            {"scale": args.scale, "spark": SPARK, "cores": 2, "table": table, "raw": results}, indent=2))
        chart(table, OUT / "spark_peers.png")
        print(f"wrote {OUT / 'spark_peers.json'} and {OUT / 'spark_peers.png'}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
