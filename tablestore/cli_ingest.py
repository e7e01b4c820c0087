"""`tablestore ingest`: the CDC job from the command line (tablestore/spark/ingest.py does the work).

    tablestore ingest shop.orders --topic shop.public.orders --format debezium-json \\
        --bootstrap-servers 127.0.0.1:19092 --warehouse /wh [--create] [--checkpoint DIR] \\
        [--available-now | --trigger-interval 1s] [--starting-offsets earliest|latest] [--bad-records fail|skip] \\
        [--source-table db.t]

It runs until Ctrl-C or SIGTERM (then it stops after the micro-batch in flight: exit 0) or, with
`--available-now`, until the topic is read to the end it had at the start. Progress goes to stdout every
`--progress-every` seconds (a JSON object per line with `--output json`), then a summary.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from types import FrameType
from typing import Any, Callable

import catalog
from logstore import LogStoreError, topic_partitions
from tablestore.cdc import FORMATS, JOB_MAX_OFFSETS_PER_TRIGGER

WAREHOUSE_ENV = "TABLESTORE_WAREHOUSE"
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|seconds?|m|min|minutes?)?\s*$")


def trigger_interval(text: str) -> str:
    """`1s`, `500ms`, `2 min` as Spark's processing-time trigger (`1 second`)."""
    m = _INTERVAL.match(text)
    if m is None:
        raise argparse.ArgumentTypeError(f"--trigger-interval {text!r}: give a duration like 1s, 500ms or 1min")
    value, unit = float(m.group(1)), (m.group(2) or "s")
    ms = value if unit == "ms" else value * 60000 if unit.startswith("m") else value * 1000
    return f"{int(ms)} milliseconds"


def _pairs(items: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"{flag} {item!r}: give key=value")
        out[key.strip()] = value.strip()
    return out


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True, help="the Kafka topic of the source table's changes")
    p.add_argument("--source-table", metavar="NAME",
                   help="take only this source table's records (table, database.table or schema.table, "
                        "database.schema.table); the others give no rows (default: on canal-json and maxwell-json "
                        "the table of the record the table is created from; every record otherwise)")
    _common_arguments(p)


def add_database_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("database", help="the warehouse database the source's tables go to (created if missing)")
    p.add_argument("--topic-pattern", required=True, metavar="REGEX",
                   help="the Kafka topics of the source tables (Spark's subscribePattern; topics created later too)")
    p.add_argument("--including", metavar="REGEX", help="only the source tables whose name matches")
    p.add_argument("--excluding", metavar="REGEX", help="not the source tables whose name matches")
    p.add_argument("--table-prefix", default="", metavar="P", help="put P before each table's name")
    _common_arguments(p, database=True)


def _common_arguments(p: argparse.ArgumentParser, database: bool = False) -> None:
    p.add_argument("--format", default="debezium-json", choices=FORMATS, help="the records' format (default: %(default)s)")
    p.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,...]", help="the source's Kafka cluster")
    p.add_argument("--create", action="store_true",
                   help="create a table (and its database) from its first record if it does not exist")
    p.add_argument("--checkpoint", metavar="DIR",
                   help="Spark checkpoint (default: " + ("<database dir>/_ingest/database-<hash of the pattern>"
                        if database else "<table dir>/checkpoint/ingest-<topic>") + ": a restart resumes)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--available-now", action="store_true", help="read what the topic holds now, then exit 0")
    when.add_argument("--trigger-interval", type=trigger_interval, default="1s", metavar="DURATION",
                      help="how often a micro-batch starts (default: 1s)")
    p.add_argument("--starting-offsets", choices=("earliest", "latest"), default="earliest",
                   help="where a new checkpoint starts reading (default: %(default)s); a checkpoint resumes")
    p.add_argument("--bad-records", choices=("fail", "skip"), default="fail",
                   help="a record that is not valid for its format: stop (default) or skip and count it")
    p.add_argument("--max-offsets-per-trigger", type=int, metavar="N", default=JOB_MAX_OFFSETS_PER_TRIGGER,
                   help="cap one micro-batch at N records (default: %(default)s; 0: no cap)")
    p.add_argument("--table-option", action="append", metavar="K=V",
                   help="an option of the table --create creates (e.g. bucket=4); repeatable")
    p.add_argument("--kafka-option", action="append", metavar="K=V",
                   help="an option of Spark's Kafka source (e.g. kafka.security.protocol=SSL); repeatable")
    p.add_argument("--master", default=None, help="Spark master (default: local[*])")
    p.add_argument("--conf", action="append", metavar="K=V", help="a Spark setting; repeatable")
    p.add_argument("--spark-log-level", default=None, choices=("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG"),
                   help="Spark's own log on stderr at this level (default: none on the console: the job reports "
                        "its errors itself, in one line, and Spark's log with every stack goes to "
                        "~/.cache/tablestore/logs/spark.log)")
    p.add_argument("--progress-every", type=float, default=5.0, metavar="SECONDS",
                   help="print progress this often (default: %(default)s)")


def _printer(output: str, every_s: float) -> Callable[[Any], None]:
    last = [0.0]

    def show(progress: Any) -> None:
        now = time.monotonic()
        if now - last[0] < every_s and progress.state not in ("done", "evolve"):
            return
        last[0] = now
        if output == "json":
            print(json.dumps({"progress": vars(progress)}, default=str), flush=True)
        else:
            print(progress.line(), flush=True)

    return show


def _database_summary(progress: Any) -> str:
    lines = [f"ingested {progress.events:,} events into {len(progress.tables)} tables of {progress.database} as "
             f"{progress.rows:,} changes in {progress.elapsed_s:.1f} s ({progress.batches} micro-batches)"]
    lines += [f"  {name}: {events:,} events" for name, events in sorted(progress.tables.items())]
    if progress.created:
        lines.append(f"  created: {', '.join(progress.created)}")
    if progress.bad_records:
        lines.append(f"  bad records skipped: {progress.bad_records:,}")
    lines += [f"  schema change: {change}" for change in progress.schema_changes]
    return "\n".join(lines)


def _summary(progress: Any) -> str:
    """`tablestore ingest`'s summary: IngestProgress.summary (events: records read but the bad ones skipped), then
    the source table it took and the schema changes it followed."""
    lines = [progress.summary()]
    if progress.source_table is not None:
        lines.append(f"  source table: {progress.source_table}")
    for change in progress.schema_changes:
        lines.append(f"  schema change: {change}")
    return "\n".join(lines)


def _settings(args: argparse.Namespace, usage_error: type[Exception]) -> tuple[str, dict[str, str], dict[str, str],
                                                                              dict[str, str]]:
    """The warehouse, table options, Kafka options and Spark settings the command was given."""
    warehouse = args.warehouse or os.environ.get(WAREHOUSE_ENV)
    if not warehouse:
        raise usage_error(f"give --warehouse or set {WAREHOUSE_ENV}")
    try:
        return (warehouse, _pairs(args.table_option, "--table-option"), _pairs(args.kafka_option, "--kafka-option"),
                _pairs(args.conf, "--conf"))
    except argparse.ArgumentTypeError as e:
        raise usage_error(str(e)) from None


def _console_log(args: argparse.Namespace) -> None:
    """Spark's log stays on the console (at --spark-log-level) when asked for, else goes to the log file."""
    if args.spark_log_level is not None:
        from tablestore.spark.logs import LOG_ENV

        os.environ[LOG_ENV] = "console"


def _log_level(spark: Any, args: argparse.Namespace) -> None:
    if args.spark_log_level is not None:
        spark.sparkContext.setLogLevel(args.spark_log_level)


def run_database(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """`tablestore ingest-database`; `usage_error` is the CLI's usage error class (exit 1)."""
    import tablestore.spark
    from tablestore.spark.database_sync import DatabaseIngestConfig, DatabaseIngestJob

    warehouse, table_options, kafka_options, conf = _settings(args, usage_error)
    try:
        re.compile(args.topic_pattern)
        for flag in (args.including, args.excluding):
            re.compile(flag or "")
    except re.error as e:
        raise usage_error(f"not a regular expression: {e}") from None
    catalog_options = {"log.properties.bootstrap.servers": args.bootstrap_servers} if args.create else {}
    config = DatabaseIngestConfig(
        database=args.database, topic_pattern=args.topic_pattern, bootstrap_servers=args.bootstrap_servers,
        warehouse=warehouse, format=args.format, create=args.create, including=args.including,
        excluding=args.excluding, table_prefix=args.table_prefix, checkpoint=args.checkpoint,
        available_now=args.available_now, trigger_interval=args.trigger_interval,
        starting_offsets=args.starting_offsets, bad_records=args.bad_records, kafka_options=kafka_options,
        table_options=table_options, catalog_options=catalog_options,
        max_offsets_per_trigger=args.max_offsets_per_trigger or None)
    _console_log(args)
    spark = tablestore.spark.session(warehouse, master=args.master, kafka=True, app_name="tablestore-ingest-database",
                                     **conf)
    _log_level(spark, args)
    job = DatabaseIngestJob(spark, config, on_progress=_printer(args.output, args.progress_every))
    progress = _until_signalled(job, spark)
    print(json.dumps({"summary": vars(progress)}, default=str) if args.output == "json"
          else _database_summary(progress))
    return 0


def _until_signalled(job: Any, spark: Any) -> Any:
    """`job.run()`, a first SIGINT/SIGTERM asking it to stop after the micro-batch in flight, a second at once."""
    stops = [0]

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stops[0] += 1
        if stops[0] == 1:
            print(f"stopping after the micro-batch in flight ({signal.Signals(signum).name}; again to stop now)",
                  file=sys.stderr, flush=True)
            job.request_stop()
        else:
            raise KeyboardInterrupt

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return job.run()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        spark.stop()


def run(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """The command; `usage_error` is the CLI's usage error class (exit 1)."""
    import tablestore.spark
    from tablestore.spark.cdc import CdcSourceError, check_source_table
    from tablestore.spark.ingest import IngestConfig, IngestJob

    warehouse, table_options, kafka_options, conf = _settings(args, usage_error)
    try:
        check_source_table(args.format, args.source_table)
    except CdcSourceError as e:
        raise usage_error(f"--source-table: {e}") from None
    if not args.create and not catalog.Catalog(warehouse).table_exists(args.table):   # before Spark starts
        raise catalog.TableNotFoundError(f"table {args.table!r} does not exist in {warehouse}: create it, or pass --create to "
                             "create it from the topic's first record")
    if topic_partitions({"bootstrap.servers": args.bootstrap_servers}, args.topic) is None:
        raise LogStoreError(f"topic {args.topic!r} does not exist on {args.bootstrap_servers}")
    catalog_options = {"log.properties.bootstrap.servers": args.bootstrap_servers} if args.create else {}
    config = IngestConfig(
        table=args.table, topic=args.topic, bootstrap_servers=args.bootstrap_servers, warehouse=warehouse,
        format=args.format, create=args.create, checkpoint=args.checkpoint, available_now=args.available_now,
        trigger_interval=args.trigger_interval, starting_offsets=args.starting_offsets,
        bad_records=args.bad_records, kafka_options=kafka_options, table_options=table_options,
        catalog_options=catalog_options, max_offsets_per_trigger=args.max_offsets_per_trigger or None,
        source_table=args.source_table)
    _console_log(args)
    spark = tablestore.spark.session(warehouse, master=args.master, kafka=True, app_name="tablestore-ingest",
                                     **conf)
    _log_level(spark, args)
    job = IngestJob(spark, config, on_progress=_printer(args.output, args.progress_every))
    progress = _until_signalled(job, spark)
    if args.output == "json":
        print(json.dumps({"summary": vars(progress)}, default=str))
    else:
        print(_summary(progress))
    return 0
