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
   after the backlog of Spark's slower first batches). Target: p99 <= 5 s.
3. startup: a fresh session (jars cached) and the time from `start()` to the first committed snapshot, against the
   session's own start. Target: <= 5 s.
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


def _floor(spark: Any, topic: str, bootstrap: str, out: Path, batch: int) -> float:
    from pyspark.sql import functions as F

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
           .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", str(batch)).load())
    decoded = raw.select(F.from_json(F.col("value").cast("string"), FLOOR_PAYLOAD).alias("e")).select(
        F.col("e.payload.op").alias("op"), "e.payload.after.*")
    start = time.perf_counter()
    query = (decoded.writeStream.format("parquet").option("path", str(out / "data"))
             .option("checkpointLocation", str(out / "ck")).trigger(availableNow=True).start())
    query.awaitTermination()
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
    """Steady state: the job runs (its first micro-batch, which warms Spark up, is committed) before the player
    starts; the events are made beforehand so that playing them costs the machine only the producer's sends."""
    topic = _topic(bootstrap, args.partitions)
    shop = ShopOrders(keys=args.keys, seed=5)
    logstore.produce_raw({"bootstrap.servers": bootstrap}, topic, shop.events(100))   # the table is created from it
    events = list(shop.events(args.rate * args.seconds))
    stop = threading.Event()

    def play() -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "compression.type": "lz4",
                             "queue.buffering.max.messages": 1_000_000})
        sent = 0
        start = time.monotonic()
        while not stop.is_set() and sent < len(events):
            due = min(len(events), int((time.monotonic() - start) * args.rate))
            for key, value in events[sent:due]:
                producer.produce(topic, key=key, value=value)
            producer.poll(0)
            sent = max(sent, due)
            time.sleep(0.02)
        producer.flush(30)

    job = _job(spark, str(work / "wh-latency"), topic, bootstrap, trigger_interval="1 second")
    runner = threading.Thread(target=job.run, daemon=True)
    runner.start()
    while not job.commits and runner.is_alive():
        time.sleep(0.1)
    player = threading.Thread(target=play, daemon=True)
    player.start()
    player.join()
    time.sleep(10)
    job.request_stop()
    runner.join(120)
    assert job._query is not None
    batches = [(int(p["batchId"]), int(p["numInputRows"]), p["durationMs"]) for p in job._query.recentProgress]
    for batch, rows, took in batches:
        print(f"  batch {batch}: {rows:,} events, {took.get('triggerExecution', 0) / 1000:.2f} s "
              f"(addBatch {took.get('addBatch', 0) / 1000:.2f} s)")
    return _event_latencies(job, topic, bootstrap) | {"rate": args.rate, "seconds": args.seconds}


def _event_latencies(job: IngestJob, topic: str, bootstrap: str) -> dict[str, Any]:
    """Per event played: the time of the commit of the snapshot that holds it minus the time it entered Kafka (its
    record's CreateTime, stamped by the producer as it sends: the stand-in for Debezium's `ts_ms` of an event that
    is sent as it happens)."""
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
        made += [(m.partition(), m.offset(), m.timestamp()[1] / 1000) for m in messages if m.value() is not None]
    consumer.close()
    made = [e for e in made if e[1] >= 60]   # not the first events, which the warm-up batch read
    made.sort(key=lambda e: e[2])
    steady = made[len(made) // 2:]   # the second half: the job has caught up with its warm-up's backlog
    return {"all": _summary(job.event_latencies(made)), "steady": _summary(job.event_latencies(steady))}


def _summary(lat: list[float]) -> dict[str, Any]:
    arr = np.array(lat) if lat else np.array([float("nan")])
    return {"events_measured": len(lat), "p50_s": float(np.percentile(arr, 50)), "p99_s": float(np.percentile(arr, 99)),
            "max_s": float(arr.max())}


def startup(args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    """In a fresh process: the session's start, then start() to the first committed snapshot."""
    import subprocess

    topic = _topic(bootstrap, args.partitions)
    logstore.produce_raw({"bootstrap.servers": bootstrap}, topic, ShopOrders(keys=100).events(1000))
    code = f"""
import time, json, sys
sys.path.insert(0, {str(Path(__file__).resolve().parent.parent)!r})
t0 = time.time()
import tablestore.spark
spark = tablestore.spark.session({str(work / 'wh-start')!r}, master="local[2]", kafka=True)
t1 = time.time()
from tablestore.spark.ingest import IngestConfig, IngestJob
import tablestore
job = IngestJob(spark, IngestConfig(table="shop.orders", topic={topic!r}, bootstrap_servers={bootstrap!r},
    warehouse={str(work / 'wh-start')!r}, create=True, catalog_options={{"log.properties.bootstrap.servers": {bootstrap!r}}},
    available_now=True))
job.run()
snaps = tablestore.Catalog({str(work / 'wh-start')!r}).get_table("shop.orders").snapshots()
print(json.dumps({{"session_s": t1 - t0, "first_snapshot_s": snaps[0].time_millis / 1000 - t1}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


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
            results["startup"] = startup(args, bootstrap, work)
            print(f"startup: session {results['startup']['session_s']:.1f} s, start() to the first snapshot "
                  f"{results['startup']['first_snapshot_s']:.1f} s (target <= 5 s)", flush=True)
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
            for part in ("all", "steady"):
                q = r[part]
                print(f"latency at {args.rate:,} events/s, 1 s trigger, {part} events: p50 {q['p50_s']:.2f} s, "
                      f"p99 {q['p99_s']:.2f} s over {q['events_measured']:,} events (target p99 <= 5 s)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "ingest_bench.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {OUT / 'ingest_bench.json'}")


if __name__ == "__main__":
    main()
