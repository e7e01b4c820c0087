"""How long a fresh transactional log writer takes to start (`LogWriter.start()`: the producer's
`init_transactions`, which fences an earlier producer of the same transactional id), against the project's broker.

Every Spark task that produces a bucket's log in a process that has no producer of that bucket yet pays it
(tablestore/log_publish.py: the log job's tasks land on either executor, so a bucket's cached producer is often
fenced by the other's), and so does every new write session of the table API. Per round, both ways, interleaved:
- `raw`: a librdkafka producer with the writer's configuration, then `init_transactions` at once (what
  `LogWriter.start()` did before it waited for a broker connection first);
- `writer`: `LogWriter.start()` as it is, then one transaction of `--records` records, as a log task does.
Transactional ids alternate between two, as the two executors' tasks of one bucket do. Prints p50, p90 and max
of each, writes bench/out/log_start.json. Not a test: times depend on the machine.

    .venv/bin/python bench/log_start_bench.py [--rounds 30] [--records 1000]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
from confluent_kafka import Producer

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tablestore  # noqa: E402
from logstore import broker  # noqa: E402
from logstore.kafka import producer_config  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def _stats(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(float(np.percentile(ms, 50)), 1), "p90_ms": round(float(np.percentile(ms, 90)), 1),
            "max_ms": round(max(ms), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--records", type=int, default=1000)
    args = parser.parse_args()
    started_broker = broker.status() is None
    bootstrap = broker.status() or broker.start()
    try:
        with tempfile.TemporaryDirectory(prefix="log-start-bench-") as tmp:
            cat = tablestore.Catalog(f"{tmp}/wh", options={
                "table-storage.log.properties.bootstrap.servers": bootstrap})
            cat.create_database("db")
            table = cat.create_table("db.t", SCHEMA, primary_key=["id"], options={
                "bucket": "2", "log.system": "kafka", "log.consistency": "transactional"})
            log = table._write_target().log
            assert log is not None
            rows = pa.table({"_row_kind": ["+I"] * args.records, "id": np.arange(args.records),
                             "v": ["x"] * args.records})
            partitions = np.zeros(args.records, dtype=np.int32)
            times: dict[str, list[float]] = {"raw": [], "writer": []}
            for i in range(args.rounds):
                tid = f"tablestore-bench-start-{i % 2}"
                began = time.perf_counter()
                raw = Producer(producer_config(log.options.properties, tid))
                raw.init_transactions(log.options.request_timeout_s)
                times["raw"].append((time.perf_counter() - began) * 1000)
                raw.flush()
                writer = log.new_writer(tid)
                began = time.perf_counter()
                writer.start()   # fences `raw`
                times["writer"].append((time.perf_counter() - began) * 1000)
                writer.write(rows, partitions)
                writer.prepare()
                writer.commit()
                writer.close()
            cat.drop_table("db.t")
    finally:
        if started_broker:
            broker.stop()
    report = {"rounds": args.rounds, "raw": _stats(times["raw"]), "writer": _stats(times["writer"])}
    print(f"{'start':<8} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8}")
    for name in ("raw", "writer"):
        s = report[name]
        assert isinstance(s, dict)
        print(f"{name:<8} {s['p50_ms']:>8} {s['p90_ms']:>8} {s['max_ms']:>8}")
    out = ROOT / "bench" / "out" / "log_start.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
