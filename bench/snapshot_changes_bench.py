"""The changes of one snapshot of a table without a log (tablestore.snapshot_changes: what each micro-batch of
`readStream.format("managed")` reads per new snapshot, and what the `$changes` system table shows): a commit of
`--changes` changes (70% updates of existing keys, 20% inserts, 10% deletes) into a primary-key table of `--rows`
rows in `--buckets` buckets, once with the table's files compacted into one run per bucket and once with them as
they were written. Also times the snapshot that compacts the commit (it changes no row). Best of `--repeat`.
Not a test. Prints a table, writes bench/out/snapshot_changes.json.

    .venv/bin/python bench/snapshot_changes_bench.py [--rows 1000000] [--changes 1000] [--buckets 2]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tablestore  # noqa: E402
from tablestore.snapshot_changes import snapshot_changes  # noqa: E402
from changes_microbatch_bench import SCHEMA, _best, _rows  # noqa: E402  (the same rows as the log's bench)

OUT = Path(__file__).resolve().parent / "out"


def _changes(rows: int, changes: int, rng: np.random.Generator) -> pa.Table:
    kinds = rng.choice(np.array(["+U", "+I", "-D"], dtype=object), changes, p=[0.7, 0.2, 0.1])
    existing = rng.choice(rows, changes, replace=False)
    ids = np.where(kinds == "+I", rows + np.arange(changes), existing).astype(np.int64)
    return pa.table({"_row_kind": pa.array(kinds.tolist(), pa.string()), **_rows(ids, rng)})


def _case(root: str, name: str, args: argparse.Namespace, compacted: bool) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    cat = tablestore.Catalog(os.path.join(root, name))
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"],
                         options={"bucket": str(args.buckets), "log.system": "none",
                                  "write-only": "true"})
    step = -(-args.rows // 4)   # four commits: four sorted runs per bucket unless compacted
    for lo in range(0, args.rows, step):
        t.write(pa.table(_rows(np.arange(lo, min(lo + step, args.rows), dtype=np.int64), rng), schema=SCHEMA))
    if compacted:
        t.compact(full=True)
    store = t._handle.store
    t.write(_changes(args.rows, args.changes, rng))
    commit = store.snapshots.latest()
    assert commit is not None
    parent = store.snapshots.get(commit.id - 1)
    seconds, out = _best(args.repeat, lambda: list(snapshot_changes(store, parent, commit)))
    emitted = sum(c.num_rows for c in out)
    t.compact(full=True)
    compact = store.snapshots.latest()
    assert compact is not None and compact.id == commit.id + 1
    compact_s, none = _best(args.repeat, lambda: list(snapshot_changes(store, commit, compact)))
    assert sum(c.num_rows for c in none) == 0, "a compaction changed rows"
    return {"case": name, "changes_s": seconds, "changes": emitted, "compaction_snapshot_s": compact_s}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=1_000)
    parser.add_argument("--buckets", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="snapshot-changes-bench-")
    try:
        results = [_case(root, "compacted", args, compacted=True), _case(root, "four runs", args, compacted=False)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"changes of one commit of {args.changes:,} changes into {args.rows:,} rows, {args.buckets} buckets "
          f"(best of {args.repeat}):")
    print(f"{'table':>10} {'changes s':>10} {'rows out':>9} {'compaction snapshot s':>22}")
    for r in results:
        print(f"{r['case']:>10} {r['changes_s']:>10.3f} {r['changes']:>9,} {r['compaction_snapshot_s']:>22.3f}")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "snapshot_changes.json").write_text(json.dumps({
        "args": vars(args), "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                        "load": os.getloadavg()}, "results": results}, indent=2))
    print(f"wrote {OUT / 'snapshot_changes.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
