"""docker-compose.yml and docker/Dockerfile, checked without Docker: every image pinned, the services the demo needs
there and wired to each other, the demo's command one `tablestore demo` accepts, host ports on loopback only."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from catalog import is_catalog_option
from tablestore.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
COMPOSE = ROOT / "docker-compose.yml"
VERSION_TAG = re.compile(r"^v?\d+(\.\d+)+(\.Final|[-_][\w.-]+)?$")
"""An exact release (`4.1.1`, `4.44`, `3.12.12-slim-bookworm`, Debezium's `3.6.1.Final`), not a moving name such as
`latest` or `slim`."""


def services() -> dict[str, dict[str, Any]]:
    loaded = yaml.safe_load(COMPOSE.read_text())
    return loaded["services"]  # type: ignore[no-any-return]


def pinned(image: str) -> bool:
    """`name:tag` with an exact version tag, or a digest."""
    if "@sha256:" in image:
        return True
    name, _, tag = image.rpartition(":")
    return bool(name) and "/" not in tag and "latest" not in tag and bool(VERSION_TAG.match(tag))


def dockerfile_of(service: dict[str, Any]) -> Path:
    build = service["build"]
    context = ROOT / (build if isinstance(build, str) else build.get("context", "."))
    return context / (build.get("dockerfile", "Dockerfile") if isinstance(build, dict) else "Dockerfile")


def base_images(dockerfile: Path) -> list[str]:
    """The images of the FROM lines that are not earlier stages (ARG defaults before the first FROM filled in)."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    images: list[str] = []
    for line in dockerfile.read_text().splitlines():
        words = line.split()
        if words[:1] == ["ARG"] and "=" in words[1] and not stages and not images:
            key, _, value = words[1].partition("=")
            args[key] = value
        elif words[:1] == ["FROM"]:
            rest = [w for w in words[1:] if not w.startswith("--")]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m.group(1), m.group(0)), rest[0])
            if image not in stages:
                images.append(image)
            if len(rest) == 3 and rest[1].upper() == "AS":
                stages.add(rest[2])
    return images


def test_every_image_is_pinned_to_an_exact_tag() -> None:
    for name, service in services().items():
        if "build" in service:
            dockerfile = dockerfile_of(service)
            assert dockerfile.is_file(), f"{name}: no {dockerfile}"
            images = base_images(dockerfile)
            assert images and all(pinned(i) for i in images), f"{name}: {dockerfile.name} bases {images}"
        else:
            assert pinned(service.get("image", "")), f"{name}: image {service.get('image')!r} is not pinned"


def test_the_pin_check_refuses_moving_tags() -> None:
    assert pinned("apache/kafka:4.1.1") and pinned("python:3.12.12-slim-bookworm") and pinned("x/y@sha256:ab")
    assert pinned("quay.io/debezium/connect:3.6.1.Final")
    for moving in ("apache/kafka", "apache/kafka:latest", "python:slim", "localhost:5000/kafka", "postgres:17"):
        assert not pinned(moving), moving


def test_the_services_the_demo_needs_are_there_and_wired() -> None:
    found = services()
    assert {"kafka", "spark-master", "spark-worker", "demo"} <= set(found)
    assert any("seaweedfs" in s.get("image", "") or "minio" in s.get("image", "") for s in found.values())
    for name, service in found.items():
        needs = service.get("depends_on", [])
        assert set(needs) <= set(found), f"{name} depends on a service that is not there: {needs}"


def test_the_cdc_services_are_the_development_helpers_as_containers() -> None:
    """PostgreSQL with logical decoding and a Debezium Kafka Connect worker of the release scripts/connect/pom.xml
    fetches, in distributed mode on the compose file's Kafka, on the host ports of `tablestore postgres|connect`."""
    from tablestore.cdc import connect, postgres

    found = services()
    pg, worker = found["postgres"], found["connect"]
    assert pg["image"].startswith("postgres:") and "wal_level=logical" in pg["command"]
    assert pg["ports"] == [f"127.0.0.1:{postgres.DEFAULT_PORT}:5432"]
    pom = (ROOT / "scripts" / "connect" / "pom.xml").read_text()
    versions = dict(re.findall(r"<(kafka|debezium)\.version>([^<]+)<", pom))
    assert worker["image"] == f"quay.io/debezium/connect:{versions['debezium']}"
    assert found["kafka"]["image"] == f"apache/kafka:{versions['kafka']}"   # the worker's Kafka is the broker's
    env = worker["environment"]
    assert f"//{env['BOOTSTRAP_SERVERS']}" in found["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    topics = {env[k] for k in ("CONFIG_STORAGE_TOPIC", "OFFSET_STORAGE_TOPIC", "STATUS_STORAGE_TOPIC")}
    assert env["GROUP_ID"] and len(topics) == 3   # distributed mode: connectors survive a restart
    assert worker["ports"] == [f"127.0.0.1:{connect.DEFAULT_PORT}:8083"]
    assert set(worker["depends_on"]) == {"kafka", "postgres"}


def test_host_ports_are_published_on_loopback_only() -> None:
    for name, service in services().items():
        for port in service.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1" and (isinstance(port, dict) or str(port).count(":") == 2), \
                f"{name}: port {port} is not bound to 127.0.0.1"


def test_the_demo_command_is_one_tablestore_demo_accepts_against_the_compose_services() -> None:
    found = services()
    command = found["demo"]["command"]
    assert command[:2] == ["tablestore", "demo"]
    args = build_parser().parse_args(command[1:])   # raises on a flag `tablestore demo` does not know
    assert args.command == "demo" and args.warehouse.startswith("s3://") and args.synthetic
    options = dict(o.split("=", 1) for o in args.option)
    assert all(is_catalog_option(k) for k in options), options
    assert {"s3.endpoint", "s3.access-key", "s3.secret-key"} <= set(options)
    assert options["s3.endpoint"].split("://")[1].split(":")[0] in found
    master_host = args.master.removeprefix("spark://").split(":")[0]
    assert args.master.startswith("spark://") and master_host in found
    advertised = found["kafka"]["environment"]["KAFKA_ADVERTISED_LISTENERS"]
    assert args.bootstrap_servers.split(":")[0] in found and f"//{args.bootstrap_servers}" in advertised


def test_the_image_installs_tablestore_with_its_spark_and_s3_extras() -> None:
    dockerfile = dockerfile_of(services()["demo"]).read_text()
    extras = [set(e.split(",")) for e in re.findall(r"pip install [^\n]*?/src\[([\w,]+)\]", dockerfile)]
    assert any({"spark", "s3"} <= e for e in extras), "no `pip install /src[spark,s3]` in the Dockerfile"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv*" in ignored and ".cache" in ignored


def test_the_image_has_s3a_for_the_hadoop_of_its_pyspark() -> None:
    """hadoop-aws (S3A) in the image, of the Hadoop release its PySpark ships: Spark's JVM keeps checkpoints and
    reads and writes raw files in the bucket, and the jars are handed over the way tablestore/spark/s3a.py reads them."""
    pyspark = pytest.importorskip("pyspark")
    from tablestore.spark import s3a

    dockerfile = dockerfile_of(services()["demo"]).read_text()
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", dockerfile, re.M))
    assert "scripts/hadoop-aws/pom.xml" in dockerfile and f"{s3a.LIBS_ENV}=/opt/tablestore/hadoop-aws" in dockerfile
    assert all(f"'{prefix}*'" in dockerfile for prefix in s3a.JAR_PREFIXES)   # the jars s3a.py looks for are kept
    if pyspark.__version__ == args["PYSPARK_VERSION"]:
        assert s3a.hadoop_version() == args["HADOOP_VERSION"]


def test_the_demo_takes_a_kafka_and_a_spark_master_of_your_own() -> None:
    args = build_parser().parse_args(["demo", "--bootstrap-servers", "k:9092", "--master", "spark://m:7077"])
    assert (args.bootstrap_servers, args.master) == ("k:9092", "spark://m:7077")
    defaults = build_parser().parse_args(["demo"])
    assert (defaults.bootstrap_servers, defaults.master) == (None, "local[2]")


def test_the_demo_command_hands_them_to_the_demo(monkeypatch: pytest.MonkeyPatch) -> None:
    import tablestore.demo_cdc
    from tablestore.cli import main

    seen: dict[str, Any] = {}
    monkeypatch.setattr(tablestore.demo_cdc, "run_cdc_demo", lambda **kw: seen.update(kw) or 0)
    assert main(["demo", "--synthetic", "--bootstrap-servers", "k:9092", "--master", "spark://m:7077",
                 "--seconds", "5"]) == 0
    assert seen == {"warehouse": None, "rate": 2000, "seconds": 5.0, "bootstrap_servers": "k:9092",
                    "master": "spark://m:7077"}


def test_the_demo_keeps_checkpoints_on_the_driver_for_an_object_store() -> None:
    from tablestore.demo_cdc import _is_local

    assert _is_local("/tmp/wh") and _is_local("file:///tmp/wh")
    assert not _is_local("s3://warehouse/demo")
