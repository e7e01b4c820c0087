"""The upsert materializer as a Spark streaming operator: shuffled -U/+U per key in, correct table out,
surviving a stop and a restart from the checkpoint."""
from __future__ import annotations

import os
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tablestore.spark import upsert_materialize

pytestmark = pytest.mark.spark

Event = tuple[str, int, str]


def correct_changelog(rng: random.Random, keys: int) -> dict[int, list[Event]]:
    """Per key, a changelog in the right order: +I, then updates as -U/+U pairs or, as a join emits them when the
    joined row changes, -D/+I pairs; sometimes a final -D."""
    per_key: dict[int, list[Event]] = {}
    for k in range(keys):
        value = f"k{k}v0"
        events: list[Event] = [("+I", k, value)]
        for j in range(1, rng.randint(1, 5)):
            new = f"k{k}v{j}"
            retract, add = ("-U", "+U") if rng.random() < 0.5 else ("-D", "+I")
            events += [(retract, k, value), (add, k, new)]
            value = new
        if rng.random() < 0.2:
            events.append(("-D", k, value))
        per_key[k] = events
    return per_key


def shuffled(rng: random.Random, per_key: dict[int, list[Event]]) -> list[Event]:
    """The arrival order a join shuffled on another column produces: an add often overtakes the retraction before
    it, keys interleave."""
    streams = []
    for events in per_key.values():
        events = list(events)
        for i in range(1, len(events) - 1):
            if events[i][0] in ("-U", "-D") and events[i + 1][0] in ("+U", "+I") and rng.random() < 0.7:
                events[i], events[i + 1] = events[i + 1], events[i]
        streams.append(events)
    arrival: list[Event] = []
    while streams:
        s = rng.choice(streams)
        arrival.append(s.pop(0))
        if not s:
            streams.remove(s)
    return arrival


def apply_upserts(state: dict[int, str], rows: list[tuple[str, int, str]]) -> None:
    """An upsert sink keyed by primary key: +I/+U put, -D delete, -U ignored."""
    for kind, key, value in rows:
        if kind in ("+I", "+U"):
            state[key] = value
        elif kind == "-D":
            state.pop(key, None)


def expected_state(per_key: dict[int, list[Event]]) -> dict[int, str]:
    state: dict[int, str] = {}
    for events in per_key.values():
        apply_upserts(state, events)
    return state


def write_files(directory: Path, arrival: list[Event], files: int, first: int = 0) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    size = -(-len(arrival) // files)
    for f in range(files):
        chunk = arrival[f * size : (f + 1) * size]
        seq = list(range(first + f * size, first + f * size + len(chunk)))
        table = pa.table({"_row_kind": [e[0] for e in chunk], "id": pa.array([e[1] for e in chunk], pa.int64()),
                          "v": [e[2] for e in chunk], "seq": pa.array(seq, pa.int64())})
        path = directory / f"part-{f:04d}.parquet"
        pq.write_table(table, path)
        # the file source takes new files in modification-time order: make it the arrival order
        os.utime(path, (1_700_000_000 + f, 1_700_000_000 + f))


def run(spark: Any, source: Path, checkpoint: Path, sink: dict[int, str], **kwargs: Any) -> None:
    schema = "_row_kind string, id long, v string, seq long"
    stream = spark.readStream.schema(schema).option("maxFilesPerTrigger", 2).parquet(str(source))
    out = upsert_materialize(stream, primary_key=["id"], order_by="seq", **kwargs)

    def apply(batch: Any, _: int) -> None:
        rows = sorted((r["seq"], r["_row_kind"], r["id"], r["v"]) for r in batch.collect())
        apply_upserts(sink, [(kind, key, value) for _, kind, key, value in rows])

    query = (out.writeStream.foreachBatch(apply).option("checkpointLocation", str(checkpoint))
             .trigger(availableNow=True).start())
    query.awaitTermination()


@pytest.mark.parametrize("strategy", ["ADAPTIVE", "LEGACY"])
def test_shuffled_changelog_is_reconciled_and_survives_a_restart(spark: Any, tmp_path: Path, strategy: str) -> None:
    rng = random.Random(7)
    per_key = correct_changelog(rng, keys=60)
    arrival = shuffled(rng, per_key)
    expected = expected_state(per_key)
    naive: dict[int, str] = {}
    apply_upserts(naive, arrival)
    assert naive != expected, "the shuffle must break a naive upsert sink, or the test proves nothing"

    files = tmp_path / "all"
    write_files(files, arrival, files=6)
    uninterrupted: dict[int, str] = {}
    run(spark, files, tmp_path / "ckpt-once", uninterrupted, strategy=strategy)
    assert uninterrupted == expected

    # the same stream, stopped after the first half and restarted from its checkpoint
    source = tmp_path / "restarted"
    source.mkdir()
    paths = sorted(files.iterdir())
    for p in paths[:3]:
        shutil.copy2(p, source / p.name)
    restarted: dict[int, str] = {}
    run(spark, source, tmp_path / "ckpt", restarted, strategy=strategy)
    assert restarted != expected  # half the stream is not the whole answer
    for p in paths[3:]:
        shutil.copy2(p, source / p.name)
    run(spark, source, tmp_path / "ckpt", restarted, strategy=strategy)
    assert restarted == expected == uninterrupted


def test_output_keeps_the_columns_and_marks_the_kinds(spark: Any, tmp_path: Path) -> None:
    arrival: list[Event] = [("+I", 1, "a"), ("+U", 1, "b"), ("-U", 1, "a"), ("+I", 2, "x"), ("-D", 2, "x")]
    write_files(tmp_path / "src", arrival, files=1)
    collected: list[tuple[Any, ...]] = []
    stream = spark.readStream.schema("_row_kind string, id long, v string, seq long").parquet(str(tmp_path / "src"))
    out = upsert_materialize(stream, primary_key=["id"], order_by="seq", strategy="MAP")
    assert out.columns == ["_row_kind", "id", "v", "seq"]
    query = (out.writeStream.foreachBatch(lambda b, _: collected.extend(tuple(r) for r in b.collect()))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(collected, key=lambda r: r[3]) == [
        ("+I", 1, "a", 0), ("+U", 1, "b", 1), ("+I", 2, "x", 3), ("-D", 2, "x", 4)
    ]


def test_bad_arguments_are_refused_before_the_query_starts(spark: Any) -> None:
    from tablestore import TableStoreError

    df = spark.createDataFrame([("+I", 1, "a")], "_row_kind string, id long, v string")
    with pytest.raises(TableStoreError, match="nope"):
        upsert_materialize(df, primary_key=["nope"])
    with pytest.raises(TableStoreError, match="_row_kind"):
        upsert_materialize(df.drop("_row_kind"), primary_key=["id"])
    with pytest.raises(TableStoreError, match="strategy"):
        upsert_materialize(df, primary_key=["id"], strategy="FASTEST")


@pytest.mark.parametrize("ttl", [None, "200 ms"])
def test_ttl_expires_history_between_micro_batches(spark: Any, tmp_path: Path, ttl: str | None) -> None:
    """With a TTL, what a key held in an earlier micro-batch is gone once the TTL passed: a later retraction
    finds nothing and a later add starts over (+I); a key never touched again is dropped by its timeout."""
    import time

    source, checkpoint = tmp_path / "src", tmp_path / "ckpt"
    collected: list[tuple[Any, ...]] = []

    def batch(name: str, events: list[Event], first_seq: int) -> None:
        write_files(source / name, events, files=1, first=first_seq)
        stream = (spark.readStream.schema("_row_kind string, id long, v string, seq long")
                  .option("recursiveFileLookup", "true").parquet(str(source)))
        out = upsert_materialize(stream, primary_key=["id"], order_by="seq", ttl=ttl)
        query = (out.writeStream.foreachBatch(lambda b, _: collected.extend(tuple(r) for r in b.collect()))
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        query.awaitTermination()

    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")  # AvailableNow ends with a TTL
    try:
        batch("a", [("+I", 1, "a"), ("+I", 2, "b"), ("+I", 3, "c")], 0)
        time.sleep(0.5)
        batch("b", [("-D", 1, "a"), ("+U", 2, "b2")], 3)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    later = sorted((r for r in collected if r[3] >= 3), key=lambda r: r[3])
    keys_in_state = sorted(r["id"] for r in spark.read.format("statestore").load(str(checkpoint))
                           .selectExpr("key.id AS id").collect())
    if ttl is None:
        assert later == [("-D", 1, "a", 3), ("+U", 2, "b2", 4)]
        assert keys_in_state == [2, 3]
    else:
        assert later == [("+I", 2, "b2", 4)]
        assert keys_in_state == [2]


def test_a_bad_row_kind_fails_the_query_naming_it(spark: Any, tmp_path: Path) -> None:
    write_files(tmp_path / "src", [("+I", 1, "a"), ("+X", 1, "b")], files=1)
    stream = spark.readStream.schema("_row_kind string, id long, v string, seq long").parquet(str(tmp_path / "src"))
    query = (upsert_materialize(stream, primary_key=["id"], order_by="seq").writeStream.format("noop")
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    with pytest.raises(Exception, match=r"invalid _row_kind \+X"):
        query.awaitTermination()


def test_update_output_mode_and_a_session_without_the_jar(spark: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from tablestore import TableStoreError
    from tablestore.spark import materialize
    from tablestore.spark.jar import SparkJarError

    write_files(tmp_path / "src", [("+I", 1, "a"), ("+U", 1, "b")], files=1)
    stream = spark.readStream.schema("_row_kind string, id long, v string, seq long").parquet(str(tmp_path / "src"))
    collected: list[tuple[Any, ...]] = []
    query = (upsert_materialize(stream, primary_key=["id"], order_by="seq", output_mode="update").writeStream
             .outputMode("update").foreachBatch(lambda b, _: collected.extend(tuple(r) for r in b.collect()))
             .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert sorted(collected, key=lambda r: r[3]) == [("+I", 1, "a", 0), ("+U", 1, "b", 1)]
    with pytest.raises(TableStoreError, match="output_mode"):
        upsert_materialize(stream, primary_key=["id"], output_mode="complete")
    monkeypatch.setattr(materialize, "MAIN_CLASS", "tablestore.spark.jvm.Missing")
    with pytest.raises(SparkJarError, match="spark.jars"):
        upsert_materialize(stream, primary_key=["id"])
