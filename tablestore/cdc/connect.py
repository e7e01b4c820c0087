"""A real Kafka Connect worker with Debezium's PostgreSQL connector, for development (tests, the demo, trying CDC).

The jars come from Maven Central through ``scripts/connect/pom.xml`` (Kafka Connect of the broker's Kafka version,
Debezium's PostgreSQL connector, a log4j2 binding) into ``.cache/connect/libs`` (``TABLESTORE_CONNECT_LIBS``). The
worker runs in the background on 127.0.0.1 with its state in ``.cache/connect-run`` (``TABLESTORE_CONNECT_DIR``):
``worker.properties``, ``log4j2.properties``, ``connect.log``, ``group.id``, ``state.json`` and ``start.lock``.

Invariants (with tablestore/cdc/dev_process.py's: fixed ports, one worker per run directory, only our pid
signalled):
1. Distributed mode, one worker: the connectors, their offsets and statuses live in three Kafka topics named after
   the worker's group id (``<group>-configs``, ``-offsets``, ``-status``, replication factor 1), so a connector
   registered through the REST API survives a restart, even a ``kill -9``, of the worker. The group id is made once
   per run directory and kept in it: a new run directory is a new, empty worker.
2. The REST API listens on ``TABLESTORE_CONNECT_PORT`` (default 18083) unless given; a port held by something else
   is an error. ``start`` returns only once ``GET /`` and ``GET /connectors`` both answer (a distributed worker
   answers ``/`` before it has joined its group); it never sleeps blindly. A second ``start`` returns the same
   worker.
3. Records are Kafka Connect JSON with schemas (``{"schema": ..., "payload": ...}``), keys and values, as
   tablestore's debezium-json format reads them.

The connectors themselves (``register_postgres``, ``connector_status``, ``delete_connector``) are REST calls that
tablestore/cdc/connect_rest.py owns; they are listed here too, so that this module is the helpers' one namespace.
"""
from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from logstore import broker
from tablestore.cdc import connect_rest, dev_process as proc
from tablestore.cdc.connect_rest import (ConnectError, ConnectorFailedError, connector_status, delete_connector,
                                         register_postgres, slot_name_for)
from tablestore.cdc.dev_process import ServiceStartError, ServiceToolMissingError

__all__ = ["ConnectError", "ConnectWorker", "ConnectorFailedError", "connector_status", "default_port",
           "default_url", "delete_connector", "ensure_jars", "register_postgres", "run_dir", "slot_name_for",
           "start", "status", "stop"]

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
POM = ROOT / "scripts" / "connect" / "pom.xml"
DEFAULT_LIBS = ROOT / ".cache" / "connect" / "libs"
DEFAULT_RUN_DIR = ROOT / ".cache" / "connect-run"
DEFAULT_PORT = 18083
PORT_ENV, DIR_ENV, LIBS_ENV, HEAP_ENV = ("TABLESTORE_CONNECT_PORT", "TABLESTORE_CONNECT_DIR",
                                         "TABLESTORE_CONNECT_LIBS", "TABLESTORE_CONNECT_HEAP")
MAIN_CLASS = "org.apache.kafka.connect.cli.ConnectDistributed"
STOP_GRACE_S = 30.0
_SERVICE = "kafka connect"
_JARS = ("connect-runtime-*.jar", "debezium-connector-postgres-*.jar")

_WORKER_PROPERTIES = """\
# written by tablestore/cdc/connect.py -- a development worker: distributed mode, one node
bootstrap.servers={bootstrap}
group.id={group}
config.storage.topic={group}-configs
offset.storage.topic={group}-offsets
status.storage.topic={group}-status
config.storage.replication.factor=1
offset.storage.replication.factor=1
status.storage.replication.factor=1
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
listeners=http://127.0.0.1:{port}
rest.advertised.host.name=127.0.0.1
rest.advertised.port={port}
# no plugin.path (an empty one means the working directory): every plugin is on the classpath, and each one has
# a ServiceLoader manifest, so none is looked for by scanning classes
plugin.discovery=service_load
offset.flush.interval.ms=1000
# one worker: a task of a worker that vanished (kill -9) is given back at once, not after 5 minutes
scheduled.rebalance.max.delay.ms=0
"""

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
logger.configs.name = org.apache.kafka.common.config.AbstractConfig
logger.configs.level = WARN
logger.appinfo.name = org.apache.kafka.common.utils.AppInfoParser
logger.appinfo.level = WARN
logger.plugins.name = org.apache.kafka.connect.runtime.isolation
logger.plugins.level = WARN
logger.reflections.name = org.reflections
logger.reflections.level = ERROR
logger.jetty.name = org.eclipse.jetty
logger.jetty.level = WARN
"""


@dataclass(frozen=True)
class ConnectWorker:
    """A running worker: its REST API at `url`, writing to the Kafka cluster at `bootstrap`."""

    url: str
    port: int
    pid: int
    bootstrap: str
    group_id: str


def default_port() -> int:
    """The REST port: ``TABLESTORE_CONNECT_PORT`` or 18083."""
    return int(os.environ.get(PORT_ENV, DEFAULT_PORT))


def default_url() -> str:
    """The REST API of a worker on the default port."""
    return f"http://127.0.0.1:{default_port()}"


def run_dir(data_dir: Path | None = None) -> Path:
    """The worker's state and log directory: `data_dir`, ``TABLESTORE_CONNECT_DIR`` or the default."""
    if data_dir is not None:
        return Path(data_dir).resolve()
    return Path(os.environ.get(DIR_ENV, DEFAULT_RUN_DIR)).resolve()


def start(data_dir: Path | None = None, port: int | None = None, bootstrap_servers: str | None = None,
          timeout_s: float = 120) -> ConnectWorker:
    """Start the worker in the background (fetching the jars first if needed) against `bootstrap_servers` (default:
    the project's development broker); return it once its REST API serves connectors. Idempotent."""
    rdir = run_dir(data_dir)
    rdir.mkdir(parents=True, exist_ok=True)
    with proc.locked(rdir / "start.lock"):
        running = _live(rdir)
        if running is not None:
            if (port is not None and port != running.port) or bootstrap_servers not in (None, running.bootstrap):
                log.warning("kafka connect already running at %s on %s; ignoring port %s / bootstrap %s",
                            running.url, running.bootstrap, port, bootstrap_servers)
            if proc.ready_unless_ended(running.pid, rdir, lambda: _wait_ready(running, rdir, timeout_s), "worker"):
                return running
        rest_port = port if port is not None else default_port()
        proc.check_port_free(_SERVICE, rest_port, PORT_ENV)
        java = _java()
        libs = ensure_jars()
        bootstrap = _bootstrap(bootstrap_servers)
        group = _group_id(rdir)
        props = rdir / "worker.properties"
        props.write_text(_WORKER_PROPERTIES.format(bootstrap=bootstrap, group=group, port=rest_port))
        (rdir / "log4j2.properties").write_text(_LOG4J2)
        began = time.monotonic()
        heap = os.environ.get(HEAP_ENV, "512m")
        cmd = [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true",
               f"-Dlog4j2.configurationFile={rdir / 'log4j2.properties'}", "-cp", f"{libs}/*", MAIN_CLASS, str(props)]
        pid = proc.launch(cmd, log_file=rdir / "connect.log", cwd=rdir)
        worker = ConnectWorker(f"http://127.0.0.1:{rest_port}", rest_port, pid, bootstrap, group)
        proc.write_state(rdir, {"pid": pid, "port": rest_port, "bootstrap": bootstrap, "group_id": group,
                                "started_at": time.time()})
        try:
            _wait_ready(worker, rdir, timeout_s)
        except BaseException:
            proc.terminate(pid, first=signal.SIGTERM, grace_s=10)
            (rdir / "state.json").unlink(missing_ok=True)
            raise
        log.info("kafka connect ready at %s after %.1f s (pid %s, group %s)", worker.url, time.monotonic() - began,
                 pid, group)
        return worker


def stop(data_dir: Path | None = None) -> bool:
    """Stop the worker of this run directory (its connectors stop with it and resume at its next start); True if
    one was running and is now stopped."""
    rdir = run_dir(data_dir)
    if not rdir.exists():
        return False
    with proc.locked(rdir / "start.lock"):
        running = _live(rdir)
        if running is None:
            return False
        proc.terminate(running.pid, first=signal.SIGTERM, grace_s=STOP_GRACE_S)
        (rdir / "state.json").unlink(missing_ok=True)
        return True


def status(data_dir: Path | None = None) -> ConnectWorker | None:
    """The worker of this run directory if it runs and its REST API serves connectors, else None."""
    running = _live(run_dir(data_dir))
    if running is None or not connect_rest.answers(running.url, timeout_s=3):
        return None
    return running


def ensure_jars() -> Path:
    """The directory of the worker's jars (``TABLESTORE_CONNECT_LIBS`` or .cache/connect/libs), fetched with mvn
    if absent."""
    libs = Path(os.environ.get(LIBS_ENV, DEFAULT_LIBS)).resolve()
    if _has_jars(libs):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ServiceToolMissingError("mvn", f"install Maven to fetch the Kafka Connect jars (or set {LIBS_ENV})")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with proc.locked(libs.parent / "fetch.lock"):
        if _has_jars(libs):
            return libs
        tmp = libs.parent / f".libs-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("fetching kafka connect and debezium jars with %s into %s", mvn, libs)
        cmd = [mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={tmp}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not _has_jars(tmp):
            shutil.rmtree(tmp, ignore_errors=True)
            raise ServiceStartError(_SERVICE, f"mvn could not fetch the jars (exit {done.returncode})", None,
                                    (done.stdout + done.stderr)[-4000:])
        shutil.rmtree(libs, ignore_errors=True)
        os.replace(tmp, libs)
    return libs


# ---------------------------------------------------------------------------------------------- internals


def _has_jars(libs: Path) -> bool:
    return all(any(libs.glob(pattern)) for pattern in _JARS)


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise ServiceToolMissingError("java", "Kafka Connect 4 needs a Java 17+ runtime (apt-get install "
                                      "openjdk-17-jre)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    found = re.search(r'version "(\d+)', out.stderr + out.stdout)
    if found is None or int(found.group(1)) < 17:
        found_text = (out.stderr or out.stdout).strip().splitlines()[:1]
        raise ServiceToolMissingError("java 17+", f"Kafka Connect 4 needs it, found: {found_text}")
    return java


def _bootstrap(given: str | None) -> str:
    """The Kafka cluster to use, checked to answer: `given`, else the project's development broker."""
    bootstrap = given or broker.status() or f"127.0.0.1:{broker.default_port()}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.connection.setup.timeout.ms": 3000})
    try:
        if admin.list_topics(timeout=10).brokers:
            return bootstrap
    except KafkaException:
        pass
    hint = "" if given else ": start the development broker (`tablestore kafka start`) or give --bootstrap-servers"
    raise ConnectError(f"kafka connect needs a Kafka cluster and none answers at {bootstrap}{hint}")


def _group_id(rdir: Path) -> str:
    """The worker's group id, made at the first start and kept in the run directory (invariant 1)."""
    path = rdir / "group.id"
    if not path.exists():
        label = re.sub(r"[^A-Za-z0-9_-]", "-", rdir.name)[:40]
        path.write_text(f"tablestore-connect-{label}-{secrets.token_hex(4)}\n")
    return path.read_text().strip()


def _live(rdir: Path) -> ConnectWorker | None:
    props = str(rdir / "worker.properties")
    state = proc.read_state(rdir, lambda pid: proc.is_ours(pid, "java", (MAIN_CLASS, props)))
    if state is None:
        return None
    port = int(state["port"])
    return ConnectWorker(f"http://127.0.0.1:{port}", port, int(state["pid"]), str(state["bootstrap"]),
                         str(state["group_id"]))


def _wait_ready(worker: ConnectWorker, rdir: Path, timeout_s: float) -> None:
    proc.wait_ready(_SERVICE, worker.pid, rdir / "connect.log",
                    lambda t: connect_rest.answers(worker.url, timeout_s=t), timeout_s,
                    f"its REST API at {worker.url} did not serve connectors", poll_s=0.2)
