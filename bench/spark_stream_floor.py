"""The floor of a micro-batch read through a PySpark Python streaming data source: a trivial source whose `read`
yields 1,000 rows at once (no table, no I/O), read by the same `foreachBatch` sink as `bench/spark_peers.py`'s
latency (the batch's marks selected, distinct, collected), timed from the moment its offset moves to the rows
collected. What is left is PySpark's own cost of a Python stream reader's micro-batch (its planner worker's
`partitions`, the reader pickled to a Python worker, the Arrow hand-over) plus Spark's (the offset log, the sink's
job). Not a test. Prints the median and the spread, writes bench/out/spark_stream_floor.json.

    .venv-spark-4.1.2/bin/python bench/spark_stream_floor.py [--batches 9]
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
from typing import Any, Iterator

OUT = Path(__file__).resolve().parent / "out"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=9)
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

    work = Path(tempfile.mkdtemp(prefix="stream-floor-"))
    state = work / "offset"
    state.write_text("0")

    class Reader(DataSourceStreamReader):
        def initialOffset(self) -> dict[str, int]:
            return {"n": 0}

        def latestOffset(self, start: Any = None, limit: Any = None) -> dict[str, int]:
            return {"n": int(state.read_text() or 0)}

        def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
            return [InputPartition(i) for i in range(start["n"] + 1, end["n"] + 1)]

        def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
            n = 1000
            yield pa.RecordBatch.from_pydict({"_row_kind": ["+I"] * n, "id": list(range(n)), "a": list(range(n)),
                                              "b": [0.0] * n, "c": [f"mark-{partition.value - 1}"] * n})

        def commit(self, end: dict[str, int]) -> None:
            pass

    class Source(DataSource):
        @classmethod
        def name(cls) -> str:
            return "stream_floor"

        def schema(self) -> str:
            return "_row_kind string, id bigint, a bigint, b double, c string"

        def streamReader(self, schema: Any) -> Reader:
            return Reader()

    spark = (SparkSession.builder.master("local[2]").appName("stream-floor")
             .config("spark.sql.shuffle.partitions", "2").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(Source)
    arrived: dict[str, float] = {}

    def sink(df: Any, _: int) -> None:
        marks = [row.c for row in df.select("c").where("c LIKE 'mark-%'").distinct().collect()]
        now = time.time()
        for mark in marks:
            arrived.setdefault(mark, now)

    query = (spark.readStream.format("stream_floor").load().writeStream.foreachBatch(sink)
             .option("checkpointLocation", str(work / "checkpoint")).start())
    waits = []
    try:
        while query.lastProgress is None:
            time.sleep(0.05)
        for i in range(args.batches + 1):   # the first: the warm-up
            time.sleep(0.5)
            moved = time.time()
            state.write_text(str(i + 1))
            while f"mark-{i}" not in arrived:
                if query.exception() is not None:
                    raise RuntimeError(f"the stream failed: {query.exception()}")
                time.sleep(0.005)
            if i:
                waits.append(arrived[f"mark-{i}"] - moved)
    finally:
        query.stop()
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    waits.sort()
    median = waits[len(waits) // 2]
    print(f"a trivial Python stream reader, {args.batches} micro-batches of 1,000 rows (PySpark {spark.version}): "
          f"from its offset moved to the rows collected, median {median:.3f} s (min {waits[0]:.3f}, "
          f"max {waits[-1]:.3f})")
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "spark_stream_floor.json").write_text(json.dumps({
        "args": vars(args), "spark": spark.version, "waits_s": waits, "median_s": median,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "load": os.getloadavg()}},
        indent=2))
    print(f"wrote {OUT / 'spark_stream_floor.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
