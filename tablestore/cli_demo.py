"""`tablestore demo`: its options and which demo they run (tablestore/demo_postgres.py by default,
tablestore/demo_cdc.py with `--synthetic`, tablestore/demo.py with `--python`)."""
from __future__ import annotations

import argparse

EXIT_OK = 0


def add_arguments(demo: argparse.ArgumentParser) -> None:
    """The options of `tablestore demo` (its database `shop` in `--warehouse W` is replaced, and kept at the end)."""
    which = demo.add_mutually_exclusive_group()
    which.add_argument("--synthetic", action="store_true", help="the generated source instead (Debezium events of a "
                       "generated shop's orders played into Kafka: no PostgreSQL, no Kafka Connect)")
    which.add_argument("--python", action="store_true",
                       help="the file-store demo instead (Python only: no Kafka, no Spark)")
    # with --warehouse W the demo's database W/shop.db is replaced first and kept at the end
    demo.add_argument("--seconds", type=float, default=60.0, help="how long the source runs (default: 60)")
    demo.add_argument("--rate", type=int, metavar="N", help="the source's pace: SQL transactions per second "
                      "against PostgreSQL (default: 200); with --synthetic, Debezium events per second (default: "
                      "2000)")
    demo.add_argument("--bootstrap-servers", metavar="HOST:PORT",
                      help="a Kafka cluster of your own (default: the project's own broker, started if it is not)")
    demo.add_argument("--master", default="local[2]", metavar="URL",
                      help="Spark's master, e.g. spark://host:7077 (default: local[2])")
    demo.add_argument("--postgres-port", type=int, metavar="PORT", help="the development PostgreSQL's port if the "
                      "demo starts it (default: $TABLESTORE_POSTGRES_PORT or 15432)")
    demo.add_argument("--connect-port", type=int, metavar="PORT", help="the Kafka Connect worker's REST port if "
                      "the demo starts it (default: $TABLESTORE_CONNECT_PORT or 18083)")


def run(args: argparse.Namespace, usage_error: type[Exception]) -> int:
    """The demo `args` ask for; its exit code. `usage_error`: the CLI's usage error class (exit 1)."""
    if args.python:
        from tablestore.demo import run_demo

        run_demo(args.warehouse)
        return EXIT_OK
    if args.rate is not None and args.rate <= 0:
        raise usage_error(f"--rate {args.rate}: give a positive number")
    if args.synthetic:
        from tablestore.demo_cdc import run_cdc_demo

        return run_cdc_demo(warehouse=args.warehouse, rate=args.rate or 2000, seconds=args.seconds,
                            bootstrap_servers=args.bootstrap_servers, master=args.master)
    from tablestore.demo_postgres import run_postgres_demo

    return run_postgres_demo(warehouse=args.warehouse, rate=args.rate or 200, seconds=args.seconds,
                             bootstrap_servers=args.bootstrap_servers, master=args.master,
                             postgres_port=args.postgres_port, connect_port=args.connect_port)
