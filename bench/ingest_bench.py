"""`tablestore ingest` against the floor of its work: Debezium JSON (with the Kafka Connect schema wrapper) from a
Kafka topic into a managed primary-key table with a transactional log, local[2].

    python bench/ingest_bench.py [--events 2000000] [--keys 500000] [--partitions 2] [--batch 200000]
                                 [--rate 20000 --seconds 60] [--skip throughput|latency|startup]

1. throughput: the shop generator's change stream (tablestore.cdc.shop: 30% updates, 5% deletes, the rest inserts
   until --keys orders are live) in a topic, read with Trigger.AvailableNow in micro-batches of --batch records by
   (a) the ingest job (Kafka source, JVM decoding, the `managed` sink, its log) and (b) the floor: a plain Spark job
   that reads the same topic, decodes the payload with `from_json` and appends the rows to Parquet. events/s of each
   (start of the query to its end, the session already up), and the ratio. Target: >= 50%.
2. latency: a producer thread plays the stream at --rate events/s for --seconds into a fresh topic while the ingest
   job runs with a 1 s trigger, once its first micro-batch (Spark's warm-up) is committed; per event, the time from
   its entry into Kafka to the commit of the snapshot that holds it (offsets of each micro-batch from the query's
   progress, commit times from the snapshots): p50, p99 of all of them and of the second half's (steady state,
   after the backlog of Spark's slower first batches). Target: p99 <= 5 s. The same for the floor's query (its
   micro-batches' ends as commit times), played the same events.
3. startup: a fresh process (jars cached): the session's start, then the time from `start()` to the first
   committed snapshot (target: <= 5 s); the same for the floor's query, in a fresh process of its own: Spark's own
   first micro-batch from Kafka.
Prints a table and writes bench/out/ingest_bench.json. Needs the Kafka broker (TABLESTORE_KAFKA_PORT or 19092; it
is started if it is not running). Figures depend on the machine's load: compare ratios of one run.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import logstore  # noqa: E402
import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from logstore import broker  # noqa: E402
from logstore.kafka import KafkaAdmin  # noqa: E402
from tablestore.cdc.shop import ShopOrders  # noqa: E402
from tablestore.spark.ingest import IngestConfig, IngestJob  # noqa: E402
from tablestore.spark.ingest_progress import batch_commits, event_latencies  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"
TABLE = "shop.orders"
_ROW = "order_id: BIGINT, customer_id: INT, status: STRING, amount: STRING, created_at: BIGINT, updated_at: BIGINT"
FLOOR_PAYLOAD = f"STRUCT<payload: STRUCT<before: STRUCT<{_ROW}>, after: STRUCT<{_ROW}>, op: STRING, ts_ms: BIGINT>>"
"""The floor's decoding: the payload's row images as typed columns (amount left as Debezium's base64 text)."""


def _topic(bootstrap: str, partitions: int) -> str:
    name = f"bench-cdc-{uuid.uuid4().hex[:8]}"
    KafkaAdmin({"bootstrap.servers": bootstrap}).create_topic(name, partitions, None)
    return name


def _job(spark: Any, warehouse: str, topic: str, bootstrap: str, **kwargs: Any) -> IngestJob:
    config = IngestConfig(table=TABLE, topic=topic, bootstrap_servers=bootstrap, warehouse=warehouse, create=True,
                          catalog_options={"log.properties.bootstrap.servers": bootstrap},
                          table_options={"bucket": "2"}, checkpoint=f"{warehouse}/ck-{topic}", **kwargs)
    return IngestJob(spark, config)


def _floor_query(spark: Any, topic: str, bootstrap: str, out: Path, *, batch: int | None = None,
                 trigger: str | None = None) -> Any:
    """The floor: Spark's Kafka source, the payload decoded by `from_json`, rows appended to Parquet."""
    from pyspark.sql import functions as F

    source = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    if batch:
        source = source.option("maxOffsetsPerTrigger", str(batch))
    decoded = source.load().select(F.from_json(F.col("value").cast("string"), FLOOR_PAYLOAD).alias("e")).select(
        F.col("e.payload.op").alias("op"), "e.payload.after.*")
    writer = (decoded.writeStream.format("parquet").option("path", str(out / "data"))
              .option("checkpointLocation", str(out / "ck")))
    return writer.trigger(processingTime=trigger).start() if trigger else writer.trigger(availableNow=True).start()


def _floor(spark: Any, topic: str, bootstrap: str, out: Path, batch: int) -> float:
    start = time.perf_counter()
    _floor_query(spark, topic, bootstrap, out, batch=batch).awaitTermination()
    return time.perf_counter() - start


def throughput(spark: Any, args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    topic = _topic(bootstrap, args.partitions)
    shop = ShopOrders(keys=args.keys, seed=11)
    t = time.perf_counter()
    produced = logstore.produce_raw({"bootstrap.servers": bootstrap}, topic, shop.events(args.events))
    print(f"produced {produced:,} records ({args.events:,} events) in {time.perf_counter() - t:.1f} s", flush=True)
    results: dict[str, Any] = {"events": args.events, "records": produced, "live_orders": len(shop.truth)}
    # a warm-up pass of each (class loading, code generation) on a small topic
    warm = _topic(bootstrap, args.partitions)
    logstore.produce_raw({"bootstrap.servers": bootstrap}, warm, ShopOrders(keys=1000, seed=3).events(5000))
    _floor(spark, warm, bootstrap, work / "floor-warm", args.batch)
    _job(spark, str(work / "wh-warm"), warm, bootstrap, available_now=True,
         max_offsets_per_trigger=args.batch).run()
    floor_s = _floor(spark, topic, bootstrap, work / "floor", args.batch)
    job = _job(spark, str(work / "wh"), topic, bootstrap, available_now=True, max_offsets_per_trigger=args.batch)
    t = time.perf_counter()
    progress = job.run()
    ingest_s = time.perf_counter() - t
    rows = sorted(tablestore.Catalog(str(work / "wh")).get_table(TABLE).read().to_pylist(),
                  key=lambda r: r["order_id"])
    if rows != shop.expected_rows():
        raise SystemExit("the ingested table differs from the source's state")
    results.update(floor_s=floor_s, ingest_s=ingest_s, floor_events_per_s=args.events / floor_s,
                   ingest_events_per_s=args.events / ingest_s, ratio=floor_s / ingest_s,
                   snapshots=progress.snapshots, batches=progress.batches)
    return results


def latency(spark: Any, args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    """The ingest job and the floor (Kafka -> from_json -> Parquet at the same 1 s trigger), each in steady state:
    the query runs (its first micro-batch, which warms Spark up, is done) before the player starts; the events are
    made beforehand so that playing them costs the machine only the producer's sends."""
    return {"floor": _latency_of("floor", spark, args, bootstrap, work),
            "ingest": _latency_of("ingest", spark, args, bootstrap, work)}


def _latency_of(system: str, spark: Any, args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    topic = _topic(bootstrap, args.partitions)
    shop = ShopOrders(keys=args.keys, seed=5)
    logstore.produce_raw({"bootstrap.servers": bootstrap}, topic, shop.events(100))   # the table is created from it
    events = list(shop.events(args.rate * args.seconds))
    if system == "ingest":
        job = _job(spark, str(work / f"wh-latency-{topic}"), topic, bootstrap, trigger_interval="1 second")
        runner = threading.Thread(target=job.run, daemon=True)
        runner.start()
        while not job.commits and runner.is_alive():
            time.sleep(0.1)
    else:
        query = _floor_query(spark, topic, bootstrap, work / f"floor-{topic}", trigger="1 second")
        while not batch_commits(query) and query.isActive:
            time.sleep(0.1)
    _play(events, topic, bootstrap, args.rate)
    time.sleep(10)
    if system == "ingest":
        job.request_stop()
        runner.join(120)
        query = job._query
        commits = job.commits
    else:
        commits = batch_commits(query)
        query.stop()
    for p in query.recentProgress:
        took = p["durationMs"]
        print(f"  {system} batch {p['batchId']}: {p['numInputRows']:,} events, "
              f"{took.get('triggerExecution', 0) / 1000:.2f} s (addBatch {took.get('addBatch', 0) / 1000:.2f} s)")
    return _event_latencies(commits, topic, bootstrap)


def _play(events: list[tuple[bytes, bytes | None]], topic: str, bootstrap: str, rate: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4",
                         "queue.buffering.max.messages": 1_000_000})
    sent = 0
    start = time.monotonic()
    while sent < len(events):
        due = min(len(events), int((time.monotonic() - start) * rate))
        for key, value in events[sent:due]:
            producer.produce(topic, key=key, value=value)
        producer.poll(0)
        sent = max(sent, due)
        time.sleep(0.02)
    producer.flush(30)


def _event_latencies(commits: list[tuple[dict[int, int], int]], topic: str, bootstrap: str) -> dict[str, Any]:
    """Per event played: the time of the commit that holds it minus the time it entered Kafka (its record's
    CreateTime, stamped by the producer as it sends: the stand-in for Debezium's `ts_ms` of an event sent as it
    happens). The ingest job's commits are its snapshots' times; the floor's its micro-batches' ends."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    partitions = KafkaAdmin({"bootstrap.servers": bootstrap}).partitions(topic) or 1
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    made: list[tuple[int, int, float]] = []
    quiet = time.monotonic()
    while time.monotonic() - quiet < 3:
        messages = consumer.consume(5000, 0.5)
        if messages:
            quiet = time.monotonic()
        made += [(int(m.partition() or 0), int(m.offset() or 0), m.timestamp()[1] / 1000) for m in messages
                 if m.value() is not None]
    consumer.close()
    made = sorted((e for e in made if e[1] >= 60), key=lambda e: e[2])   # not the warm-up batch's first events
    steady = made[len(made) // 2:]   # the second half: the job has caught up with any backlog of its first batches
    return {"all": _summary(event_latencies(commits, made)), "steady": _summary(event_latencies(commits, steady))}


def _summary(lat: list[float]) -> dict[str, Any]:
    arr = np.array(lat) if lat else np.array([float("nan")])
    return {"events_measured": len(lat), "p50_s": float(np.percentile(arr, 50)), "p99_s": float(np.percentile(arr, 99)),
            "max_s": float(arr.max())}


def startup(args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    """In a fresh process each: the session's start, then start() to (ingest) the first committed snapshot, and
    (the floor) the end of the Kafka -> from_json -> Parquet query's first micro-batch, on the same 1,000 events."""
    import subprocess

    topic = _topic(bootstrap, args.partitions)
    logstore.produce_raw({"bootstrap.servers": bootstrap}, topic, ShopOrders(keys=100).events(1000))
    out: dict[str, Any] = {}
    for system in ("floor", "ingest"):
        warehouse = str(work / f"wh-start-{system}")
        code = f"""
import time, json, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent)!r})
sys.argv = ["ingest_bench.py"]
t0 = time.time()
import ingest_bench as b
spark = b.tablestore.spark.session({warehouse!r}, master="local[2]", kafka=True)
spark.sparkContext.setLogLevel("ERROR")
t1 = time.time()
if {system!r} == "ingest":
    job = b._job(spark, {warehouse!r}, {topic!r}, {bootstrap!r}, available_now=True)
    job.run()
    first = b.tablestore.Catalog({warehouse!r}).get_table(b.TABLE).snapshots()[0].time_millis / 1000
else:
    query = b._floor_query(spark, {topic!r}, {bootstrap!r}, b.Path({warehouse!r}))
    query.awaitTermination()
    first = b.batch_commits(query)[0][1] / 1000
print(json.dumps({{"session_s": t1 - t0, "first_commit_s": first - t1}}))
"""
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"the start-up run of {system} failed:\n{done.stderr[-3000:]}")
        out[system] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=500_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--batch", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=20_000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--skip", action="append", default=[], choices=("throughput", "latency", "startup"))
    args = parser.parse_args()
    bootstrap = broker.status() or broker.start()
    work = Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    results: dict[str, Any] = {"args": vars(args)}
    try:
        if "startup" not in args.skip:
            r = results["startup"] = startup(args, bootstrap, work)
            print(f"startup: ingest: session {r['ingest']['session_s']:.1f} s, start() to the first snapshot "
                  f"{r['ingest']['first_commit_s']:.1f} s (target <= 5 s); floor (Kafka -> from_json -> Parquet): "
                  f"session {r['floor']['session_s']:.1f} s, start() to its first micro-batch's end "
                  f"{r['floor']['first_commit_s']:.1f} s", flush=True)
        spark = tablestore.spark.session(str(work / "wh"), master="local[2]", kafka=True,
                                         **{"spark.sql.shuffle.partitions": "2"})
        spark.sparkContext.setLogLevel("ERROR")
        if "throughput" not in args.skip:
            r = results["throughput"] = throughput(spark, args, bootstrap, work)
            print(f"throughput: ingest {r['ingest_events_per_s']:,.0f} events/s ({r['ingest_s']:.1f} s), floor "
                  f"(Kafka -> from_json -> Parquet) {r['floor_events_per_s']:,.0f} events/s ({r['floor_s']:.1f} s): "
                  f"{100 * r['ratio']:.1f}% (target >= 50%)", flush=True)
        if "latency" not in args.skip:
            r = results["latency"] = latency(spark, args, bootstrap, work)
            for system in ("ingest", "floor"):
                for part in ("all", "steady"):
                    q = r[system][part]
                    print(f"latency at {args.rate:,} events/s, 1 s trigger, {system}, {part} events: p50 "
                          f"{q['p50_s']:.2f} s, p99 {q['p99_s']:.2f} s over {q['events_measured']:,} events"
                          f"{' (target p99 <= 5 s)' if system == 'ingest' else ''}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "ingest_bench.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {OUT / 'ingest_bench.json'}")


if __name__ == "__main__":
    main()
