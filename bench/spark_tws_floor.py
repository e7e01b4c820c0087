"""What Spark's Python transformWithState costs per key, before any materializer work: a processor that does
nothing, then one state get, then get + update, then also yielding the rows. This floor is why the in-job
materializer is a JVM operator (docs/design-spark.md, "Why a JVM operator"). Same stream as
spark_materialize_bench.py (1M events over 100k keys, one trigger). Prints µs per key and writes
bench/out/spark_tws_floor.json.

    .venv/bin/python bench/spark_tws_floor.py
"""
from __future__ import annotations

import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Iterator

from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor
from pyspark.sql.types import BinaryType, StructField, StructType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from spark_materialize_bench import OUT, SCHEMA, make_changelog  # noqa: E402

from tablestore.spark import local_session  # noqa: E402

MODES = ["no state, no output", "state get", "state get + update", "get + update + output rows"]


class FloorProcessor(StatefulProcessor):  # type: ignore[misc]
    def __init__(self, mode: int) -> None:
        self.mode = mode

    def init(self, handle: Any) -> None:
        self.state = handle.getValueState("s", StructType([StructField("b", BinaryType(), False)]))
        self.out = Row("_row_kind", "id", "v", "seq")

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:
        events = list(rows)
        if self.mode >= 1:
            self.state.get()
        if self.mode >= 2:
            self.state.update((b"x" * 100,))
        if self.mode >= 3:
            for r in events:
                yield self.out(*r)

    def close(self) -> None:
        pass


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="tws-floor-"))
    keys = 100_000
    try:
        make_changelog(work / "src", 1_000_000, keys, 10)
        make_changelog(work / "warm", 20_000, 2_000, 2, seed=2)
        spark = local_session("tws-floor")
        spark.sparkContext.setLogLevel("ERROR")
        results = {}
        for mode, name in enumerate(MODES):
            for source in ("warm", "src"):
                df = spark.readStream.schema(SCHEMA).parquet(str(work / source))
                out = df.groupBy("id").transformWithState(FloorProcessor(mode), outputStructType=df.schema,
                                                          outputMode="Append", timeMode="None")
                start = time.perf_counter()
                (out.writeStream.format("noop").option("checkpointLocation", str(work / f"ck-{mode}-{source}"))
                 .trigger(availableNow=True).start().awaitTermination())
                seconds = time.perf_counter() - start
            results[name] = {"seconds": round(seconds, 2), "us_per_key": round(seconds / keys * 1e6)}
            print(f"{name:<28}{seconds:8.2f} s{seconds / keys * 1e6:8.0f} µs/key", flush=True)
        spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "spark_tws_floor.json").write_text(json.dumps({"keys": keys, "events": 1_000_000, **results}, indent=2))


if __name__ == "__main__":
    main()
