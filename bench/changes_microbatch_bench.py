"""One micro-batch of a normalized change stream (tablestore.log_changes, what each Spark task of
`readStream.format("managed")` and each range of `Table.read_changes` runs): `--changes` changes (70% updates of
existing keys, 20% inserts, 10% deletes) in `--commits` commits, on a primary-key table of `--rows` rows in
`--buckets` buckets with a log (upsert mode, transactional). Not a test.

Per bucket it times, best of `--repeat`: the whole range (`range_changes` over the batch's log range), and its
parts: reading and decoding the log records (`LogReader.read_partition`), the lookup of their keys in the table at
the snapshot before the range (a merge read filtered on the key), and the normalization itself
(`commit_changes`: seeding the normalizer, cutting at commit boundaries, collapsing, normalizing). For comparison:
reading the same range as stored (`read_range`, what `changelog.normalize = false` costs). Spark runs the
buckets as parallel tasks: a micro-batch takes about the slowest bucket's time. Prints a table, writes
bench/out/changes_microbatch.json. Needs the Kafka broker (TABLESTORE_BOOTSTRAP, default 127.0.0.1:19092).

    .venv/bin/python bench/changes_microbatch_bench.py [--rows 1000000] [--changes 100000] [--commits 5]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tablestore  # noqa: E402
from tablestore import log_changes  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
SCHEMA = pa.schema([pa.field("id", pa.int64(), False), ("a", pa.int64()), ("b", pa.float64()), ("c", pa.string())])
BOOTSTRAP_KEY = "table-storage.log.properties.bootstrap.servers"


def _rows(ids: np.ndarray, rng: np.random.Generator) -> dict[str, Any]:
    n = len(ids)
    return {"id": ids, "a": rng.integers(0, 1 << 40, n), "b": rng.random(n),
            "c": pa.array([f"v{i % 997}" for i in rng.integers(0, 1 << 20, n)], pa.string())}


def _changes(rows: int, changes: int, rng: np.random.Generator) -> pa.Table:
    kinds = rng.choice(np.array(["+U", "+I", "-D"], dtype=object), changes, p=[0.7, 0.2, 0.1])
    ids = np.where(kinds == "+I", rows + np.arange(changes), rng.integers(0, rows, changes)).astype(np.int64)
    return pa.table({"_row_kind": pa.array(kinds.tolist(), pa.string()), **_rows(ids, rng)})


def _best(repeat: int, run: Callable[[], Any]) -> tuple[float, Any]:
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        best = min(best, time.perf_counter() - started)
    return best, result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--changes", type=int, default=100_000)
    parser.add_argument("--commits", type=int, default=5)
    parser.add_argument("--buckets", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    bootstrap = os.environ.get("TABLESTORE_BOOTSTRAP", "127.0.0.1:19092")
    rng = np.random.default_rng(7)
    cat = tablestore.Catalog(tempfile.mkdtemp(prefix="changes-bench-"), options={BOOTSTRAP_KEY: bootstrap})
    cat.create_database("db", ignore_if_exists=True)
    t = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={"bucket": str(args.buckets)})
    try:
        started = time.perf_counter()
        t.write(pa.table(_rows(np.arange(args.rows, dtype=np.int64), rng), schema=SCHEMA))
        t.compact(full=True)
        print(f"table of {args.rows:,} rows written and compacted in {time.perf_counter() - started:.1f} s")
        before = dict(t._handle.store.snapshots.latest().log_offsets)  # type: ignore[union-attr]
        changes = _changes(args.rows, args.changes, rng)
        per_commit = -(-args.changes // args.commits)
        for lo in range(0, args.changes, per_commit):
            t.write(changes.slice(lo, per_commit))
        after = dict(t._handle.store.snapshots.latest().log_offsets)  # type: ignore[union-attr]
        h = t._handle
        assert h.log is not None
        source = log_changes.ChangeSource(h.identifier, h.schema.arrow_schema, h.schema.primary_keys, h.store, h.log)
        results = []
        print(f"{'bucket':>6} {'records':>8} {'changes':>8} {'total s':>8} {'log s':>7} {'lookup s':>9} "
              f"{'normalize s':>11} {'as stored s':>11}")
        for bucket in range(args.buckets):
            o1, o2 = before.get(bucket, 0), after[bucket]
            total, out = _best(args.repeat, lambda: [c for c in log_changes.range_changes(source, bucket, o1, o2)])
            read, batches = _best(args.repeat, lambda: list(h.log.new_reader().read_partition(bucket, o1, o2)))
            records = pa.Table.from_batches(batches)
            offsets = log_changes.CommitOffsets(h.store, bucket)
            snapshot = offsets.last_at_or_below(o1) or 0
            lookup, found = _best(args.repeat, lambda: log_changes._rows_at(source, snapshot, bucket, records))
            cuts = [o1, *offsets.between(snapshot, o1, o2)]
            rest, _ = _best(args.repeat, lambda: log_changes.commit_changes(
                source.schema, source.primary_key, records, found, cuts))
            raw, _ = _best(args.repeat, lambda: list(h.log.new_reader().read_range({bucket: o1}, {bucket: o2})))
            emitted = sum(c.num_rows for c in out)
            print(f"{bucket:>6} {records.num_rows:>8,} {emitted:>8,} {total:>8.3f} {read:>7.3f} {lookup:>9.3f} "
                  f"{rest:>11.3f} {raw:>11.3f}")
            results.append({"bucket": bucket, "records": records.num_rows, "changes": emitted,
                            "rows_found": found.num_rows,
                            "total_s": total, "log_read_s": read, "lookup_s": lookup, "normalize_s": rest,
                            "as_stored_s": raw})
        slowest = max(r["total_s"] for r in results)
        print(f"micro-batch of {args.changes:,} changes in {args.commits} commits: {slowest:.3f} s with one task per "
              f"bucket in parallel, {sum(r['total_s'] for r in results):.3f} s of work")
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "changes_microbatch.json").write_text(json.dumps({
            "args": vars(args), "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                                            "load": os.getloadavg()},
            "results": results, "micro_batch_s": slowest}, indent=2))
        print(f"wrote {OUT / 'changes_microbatch.json'}")
    finally:
        cat.drop_table("db.t")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
