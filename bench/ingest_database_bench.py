"""`tablestore ingest-database` of many tables against `tablestore ingest` of one table with the same total events,
and how soon a table that appears in the source is readable. local[2], Debezium JSON with the Connect wrapper (the
shop generator, tablestore.cdc.shop), transactional logs.

    python bench/ingest_database_bench.py [--tables 20] [--events 400000] [--batch 100000] [--trigger 1]
                                          [--skip throughput|new-table]

1. throughput: the same generator's stream, once in one topic (`tablestore ingest` of one table) and once split over
   --tables topics `<prefix>.public.t<i>` of --events / --tables events each (`ingest-database`, one query over
   their pattern); each read with Trigger.AvailableNow in micro-batches of --batch records in all (a warm-up pass of
   each first), in two rounds: the first creates the tables, the second reads as many events again into them (a
   running job's steady state). events/s of each and the ratio (target: >= 80%); each table checked against the
   generator's truth after each round.
2. new-table: `ingest-database` runs with a --trigger s trigger on a pattern; a new topic of the pattern gets its
   first records; the time from the topic's creation (and from its first record) to its rows being readable in the
   warehouse (target: <= 2 trigger intervals after the topic exists). Five new tables, one after the other.
Prints a table and writes bench/out/ingest_database_bench.json. Needs the project's Kafka broker (started if it is
not running). Compare ratios of one run: absolute figures follow the machine's load.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import logstore  # noqa: E402
import tablestore  # noqa: E402
import tablestore.spark  # noqa: E402
from logstore import broker  # noqa: E402
from logstore.kafka import KafkaAdmin  # noqa: E402
from tablestore.cdc.shop import ShopOrders  # noqa: E402
from tablestore.spark.ingest import IngestConfig, IngestJob  # noqa: E402
from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob  # noqa: E402

OUT = Path(__file__).resolve().parent / "out"


def _topics(bootstrap: str, prefix: str, names: list[str], partitions: int = 1) -> list[str]:
    admin = KafkaAdmin({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}.public.{n}" for n in names]
    for t in topics:
        admin.create_topic(t, partitions, None)
    return topics


def _database_job(spark: Any, warehouse: str, prefix: str, bootstrap: str, **kwargs: Any) -> DatabaseIngestJob:
    config = DatabaseIngestConfig(
        database="shop", topic_pattern=rf"{prefix}\.public\..*", bootstrap_servers=bootstrap, warehouse=warehouse,
        create=True, catalog_options={"log.properties.bootstrap.servers": bootstrap}, table_options={"bucket": "2"},
        checkpoint=f"{warehouse}/ck-{prefix}", **kwargs)
    return DatabaseIngestJob(spark, config)


def _table_job(spark: Any, warehouse: str, topic: str, bootstrap: str, **kwargs: Any) -> IngestJob:
    config = IngestConfig(table="shop.orders", topic=topic, bootstrap_servers=bootstrap, warehouse=warehouse,
                          create=True, catalog_options={"log.properties.bootstrap.servers": bootstrap},
                          table_options={"bucket": "2"}, checkpoint=f"{warehouse}/ck-{topic}", **kwargs)
    return IngestJob(spark, config)


def _load(bootstrap: str, tables: int, events: int, seed: int, into: tuple[str, str] | None = None,
          shops: tuple[dict[str, ShopOrders], ShopOrders] | None = None) -> tuple[str, str, dict[str, ShopOrders],
                                                                                  ShopOrders]:
    """Two sources of the same number of events: one topic, and `tables` topics of a pattern (`into`: the ones made
    before, given more events of the same generators `shops`)."""
    props = {"bootstrap.servers": bootstrap}
    if into is None:
        prefix = f"bdb{uuid.uuid4().hex[:6]}"
        names = [f"t{i}" for i in range(tables)]
        _topics(bootstrap, prefix, names)
        (single,) = _topics(bootstrap, f"one{uuid.uuid4().hex[:6]}", ["orders"], partitions=2)
        many = {n: ShopOrders(keys=max(100, events // tables // 4), seed=seed + i) for i, n in enumerate(names)}
        one = ShopOrders(keys=max(100, events // 4), seed=seed)
    else:
        (prefix, single), (many, one) = into, shops   # type: ignore[misc]
    for name, shop in many.items():
        logstore.produce_raw(props, f"{prefix}.public.{name}", shop.events(events // tables))
    logstore.produce_raw(props, single, one.events(events // tables * tables))
    return prefix, single, many, one


def throughput(spark: Any, args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    """Two rounds: the first creates the tables (ingest-database creates --tables of them), the second reads as many
    events again into the tables that exist (steady state: what a running job does); each checked."""
    warm = _load(bootstrap, min(args.tables, 4), 4000, seed=3)
    _database_job(spark, str(work / "warm-db"), warm[0], bootstrap, available_now=True,
                  max_offsets_per_trigger=args.batch).run()
    _table_job(spark, str(work / "warm-one"), warm[1], bootstrap, available_now=True,
               max_offsets_per_trigger=args.batch).run()
    out: dict[str, Any] = {"tables": args.tables, "batch": args.batch}
    loaded = None
    for round_ in ("first", "steady"):
        prefix, single, shops, one = loaded = _load(
            bootstrap, args.tables, args.events, seed=11, into=None if loaded is None else loaded[:2],
            shops=None if loaded is None else (loaded[2], loaded[3]))
        total = args.events // args.tables * args.tables
        t = time.perf_counter()
        single_progress = _table_job(spark, str(work / "one"), single, bootstrap, available_now=True,
                                     max_offsets_per_trigger=args.batch).run()
        single_s = time.perf_counter() - t
        t = time.perf_counter()
        db_progress = _database_job(spark, str(work / "db"), prefix, bootstrap, available_now=True,
                                    max_offsets_per_trigger=args.batch).run()
        db_s = time.perf_counter() - t
        cat = tablestore.Catalog(str(work / "db"))
        for name, shop in shops.items():
            rows = sorted(cat.get_table(f"shop.{name}").read().to_pylist(), key=lambda r: r["order_id"])
            if rows != shop.expected_rows():
                raise SystemExit(f"table shop.{name} differs from its source's state")
        rows = sorted(tablestore.Catalog(str(work / "one")).get_table("shop.orders").read().to_pylist(),
                      key=lambda r: r["order_id"])
        if rows != one.expected_rows():
            raise SystemExit("table shop.orders differs from its source's state")
        out[round_] = {"events": total, "ingest_s": single_s, "ingest_events_per_s": total / single_s,
                       "ingest_batches": single_progress.batches, "database_s": db_s,
                       "database_events_per_s": total / db_s, "database_batches": db_progress.batches,
                       "ratio": single_s / db_s,
                       "database_phases_s": {k: round(v, 2) for k, v in db_progress.phases_s.items()}}
        print(f"  {round_}: ingest-database's driver phases (s): {out[round_]['database_phases_s']}", flush=True)
    return out


def new_tables(spark: Any, args: argparse.Namespace, bootstrap: str, work: Path) -> dict[str, Any]:
    prefix = f"new{uuid.uuid4().hex[:6]}"
    props = {"bootstrap.servers": bootstrap}
    (first,) = _topics(bootstrap, prefix, ["t0"])
    logstore.produce_raw(props, first, ShopOrders(keys=50, seed=1).events(100))
    warehouse = str(work / "new")
    job = _database_job(spark, warehouse, prefix, bootstrap, trigger_interval=f"{args.trigger} seconds")
    runner = threading.Thread(target=job.run, daemon=True)
    runner.start()
    cat = tablestore.Catalog(warehouse)
    while not (cat.table_exists("shop.t0") and cat.get_table("shop.t0").latest_snapshot_id()) and runner.is_alive():
        time.sleep(0.05)
    time.sleep(3 * args.trigger)
    found = []
    for i in range(1, 6):
        name = f"t{i}"
        created = time.time()
        (topic,) = _topics(bootstrap, prefix, [name])
        produced = time.time()
        logstore.produce_raw(props, topic, ShopOrders(keys=50, seed=i).events(100))
        while runner.is_alive():
            if cat.table_exists(f"shop.{name}") and cat.get_table(f"shop.{name}").latest_snapshot_id():
                break
            time.sleep(0.02)
        readable = time.time()
        found.append({"table": name, "from_topic_s": readable - created, "from_first_record_s": readable - produced})
        print(f"  new table {name}: readable {readable - created:.2f} s after its topic was created", flush=True)
        time.sleep(args.trigger)
    job.request_stop()
    runner.join(120)
    worst = max(f["from_topic_s"] for f in found)
    return {"trigger_s": args.trigger, "tables": found, "worst_s": worst, "worst_in_triggers": worst / args.trigger}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=20)
    parser.add_argument("--events", type=int, default=400_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--trigger", type=float, default=1.0)
    parser.add_argument("--skip", action="append", default=[], choices=("throughput", "new-table"))
    args = parser.parse_args()
    bootstrap = broker.status() or broker.start()
    work = Path(tempfile.mkdtemp(prefix="ingest-database-bench-"))
    spark = tablestore.spark.session(str(work), master="local[2]", kafka=True)
    spark.sparkContext.setLogLevel("OFF")
    results: dict[str, Any] = {"args": vars(args)}
    try:
        if "throughput" not in args.skip:
            r = results["throughput"] = throughput(spark, args, bootstrap, work)
            for round_, what in (("first", "creating the tables"), ("steady", "into existing tables")):
                x = r[round_]
                print(f"throughput, {what}: ingest of one table {x['ingest_events_per_s']:,.0f} events/s "
                      f"({x['ingest_batches']} micro-batches); ingest-database of {r['tables']} tables "
                      f"{x['database_events_per_s']:,.0f} events/s ({x['database_batches']} micro-batches): "
                      f"{x['ratio']:.1%} (target >= 80%)", flush=True)
        if "new-table" not in args.skip:
            r = results["new_table"] = new_tables(spark, args, bootstrap, work)
            print(f"new table: readable at worst {r['worst_s']:.2f} s after its topic was created, "
                  f"{r['worst_in_triggers']:.1f} trigger intervals (target <= 2)", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    OUT.mkdir(exist_ok=True)
    (OUT / "ingest_database_bench.json").write_text(json.dumps(results, indent=2))
    print(f"wrote {OUT / 'ingest_database_bench.json'}")


if __name__ == "__main__":
    main()
