"""A real single-node Apache Kafka broker (KRaft, broker + controller in one JVM) run by the project.

The jars come from Maven Central through ``scripts/kafka/pom.xml`` (``mvn dependency:copy-dependencies``)
into ``.cache/kafka/libs``; the broker runs in the background on 127.0.0.1 with its state in ``.cache/kafka-run``.

Invariants:
1. Fixed ports, never random ones: broker ``TABLESTORE_KAFKA_PORT`` (default 19092), controller
   ``TABLESTORE_KAFKA_CONTROLLER_PORT`` (default broker port + 1). A port held by something else is an error.
2. One broker per run directory. ``state.json`` in it names the pid and bootstrap address; it is written only
   by ``start`` (under the directory's lock file) and removed by ``stop`` or when its pid is found dead.
3. ``start`` returns only once the admin client sees the broker in the cluster metadata; it never sleeps blindly.
   A second ``start`` while the broker runs is a no-op returning the same address.
4. Transactions work on one node: every internal topic has replication factor 1 and min.isr 1.
5. Only the pid recorded in ``state.json`` is ever signalled, and only if its command line is this run
   directory's broker.
"""
from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from logstore.errors import BrokerError, BrokerStartError, BrokerToolMissingError

__all__ = ["start", "stop", "status", "default_port", "run_dir"]

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[1]
POM = ROOT / "scripts" / "kafka" / "pom.xml"
DEFAULT_LIBS = ROOT / ".cache" / "kafka" / "libs"
DEFAULT_RUN_DIR = ROOT / ".cache" / "kafka-run"
DEFAULT_BROKER_PORT = 19092
STOP_GRACE_S = 30.0
_LOG_TAIL_LINES = 40

# Popen objects of brokers this process started, so their exit is reaped (no zombies, no ResourceWarning).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}

_SERVER_PROPERTIES = """\
# written by logstore/broker.py -- single node, combined broker + controller
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:{controller_port}
listeners=PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs={log_dirs}
num.partitions=1
auto.create.topics.enable=true
offsets.topic.replication.factor=1
offsets.topic.num.partitions=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
"""

_LOG4J2 = """\
status = warn
appender.out.type = Console
appender.out.name = STDOUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = STDOUT
logger.req.name = kafka.request.logger
logger.req.level = WARN
logger.state.name = state.change.logger
logger.state.level = WARN
"""


@dataclass(frozen=True)
class _State:
    pid: int
    port: int
    controller_port: int
    bootstrap: str
    started_at: float


def default_port() -> int:
    """The broker port: ``TABLESTORE_KAFKA_PORT`` or 19092."""
    return int(os.environ.get("TABLESTORE_KAFKA_PORT", DEFAULT_BROKER_PORT))


def run_dir(data_dir: Path | None = None) -> Path:
    """The directory holding the broker's state, logs and data: ``data_dir``, ``TABLESTORE_KAFKA_DIR`` or the default."""
    if data_dir is not None:
        return Path(data_dir).resolve()
    return Path(os.environ.get("TABLESTORE_KAFKA_DIR", DEFAULT_RUN_DIR)).resolve()


def start(data_dir: Path | None = None, port: int | None = None, timeout_s: float = 120) -> str:
    """Start the broker in the background (fetching the jars first if needed); return "127.0.0.1:PORT" once ready."""
    rdir = run_dir(data_dir)
    rdir.mkdir(parents=True, exist_ok=True)
    with _locked(rdir / "start.lock"):
        state = _live_state(rdir)
        if state is not None:
            if port is not None and port != state.port:
                log.warning("kafka already running at %s; ignoring port %s", state.bootstrap, port)
            _wait_ready(state.bootstrap, state.pid, rdir, timeout_s)
            return state.bootstrap
        broker_port = port if port is not None else default_port()
        controller_port = int(os.environ.get("TABLESTORE_KAFKA_CONTROLLER_PORT", broker_port + 1))
        for p in (broker_port, controller_port):
            _check_port_free(p)
        java = _java()
        libs = ensure_jars()
        props = _write_config(rdir, broker_port, controller_port)
        _format_storage(java, libs, rdir, props)
        began = time.monotonic()
        pid = _launch(java, libs, rdir, props)
        bootstrap = f"127.0.0.1:{broker_port}"
        _write_state(rdir, _State(pid, broker_port, controller_port, bootstrap, time.time()))
        try:
            _wait_ready(bootstrap, pid, rdir, timeout_s)
        except BaseException:
            _terminate(pid)
            (rdir / "state.json").unlink(missing_ok=True)
            raise
        log.info("kafka ready at %s after %.1f s (pid %s)", bootstrap, time.monotonic() - began, pid)
        return bootstrap


def stop(data_dir: Path | None = None) -> bool:
    """Stop the broker of this run directory; True if one was running and is now stopped."""
    rdir = run_dir(data_dir)
    if not rdir.exists():
        return False
    with _locked(rdir / "start.lock"):
        state = _live_state(rdir)
        if state is None:
            return False
        _terminate(state.pid)
        (rdir / "state.json").unlink(missing_ok=True)
        return True


def status(data_dir: Path | None = None, timeout_s: float = 5.0) -> str | None:
    """The bootstrap address if this run directory's broker is up and answering the admin client, else None."""
    state = _live_state(run_dir(data_dir))
    if state is None or not _answers(state.bootstrap, timeout_s):
        return None
    return state.bootstrap


def pid(data_dir: Path | None = None) -> int | None:
    """The process id of this run directory's broker if it runs (benchmarks keep its CPU apart from Spark's)."""
    state = _live_state(run_dir(data_dir))
    return None if state is None else state.pid


def ensure_jars() -> Path:
    """The directory of broker jars (``TABLESTORE_KAFKA_LIBS`` or .cache/kafka/libs), fetched with mvn if absent."""
    libs = Path(os.environ.get("TABLESTORE_KAFKA_LIBS", DEFAULT_LIBS)).resolve()
    if any(libs.glob("kafka_2.13-*.jar")):
        return libs
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerToolMissingError("mvn", "install Maven to fetch the Kafka jars (or set TABLESTORE_KAFKA_LIBS)")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with _locked(libs.parent / "fetch.lock"):
        if any(libs.glob("kafka_2.13-*.jar")):
            return libs
        tmp = libs.parent / f".libs-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        log.info("fetching kafka jars with %s into %s", mvn, libs)
        cmd = [mvn, "-B", "-q", "-f", str(POM), "dependency:copy-dependencies",
               "-DincludeScope=runtime", f"-DoutputDirectory={tmp}"]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0 or not any(tmp.glob("kafka_2.13-*.jar")):
            shutil.rmtree(tmp, ignore_errors=True)
            tail = "\n".join((done.stdout + done.stderr).splitlines()[-_LOG_TAIL_LINES:])
            raise BrokerError(f"mvn could not fetch the kafka jars (exit {done.returncode}):\n{tail}")
        shutil.rmtree(libs, ignore_errors=True)
        os.replace(tmp, libs)
    return libs


# ---------------------------------------------------------------------------------------------- internals


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _java() -> str:
    java = shutil.which("java")
    if java is None:
        raise BrokerToolMissingError("java", "Kafka 4 needs a Java 17+ runtime (e.g. apt-get install openjdk-17-jre)")
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    found = re.search(r'version "(\d+)', out.stderr + out.stdout)
    if found is None or int(found.group(1)) < 17:
        raise BrokerToolMissingError("java", f"Kafka 4 needs Java 17+, found: {(out.stderr or out.stdout).strip()}")
    return java


def _check_port_free(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise BrokerError(
                f"port 127.0.0.1:{port} is taken by another process ({exc.strerror}); stop it or choose other "
                "ports with TABLESTORE_KAFKA_PORT / TABLESTORE_KAFKA_CONTROLLER_PORT"
            ) from exc


def _write_config(rdir: Path, port: int, controller_port: int) -> Path:
    props = rdir / "server.properties"
    text = _SERVER_PROPERTIES.format(port=port, controller_port=controller_port, log_dirs=rdir / "data")
    props.write_text(text)
    (rdir / "log4j2.properties").write_text(_LOG4J2)
    return props


def _jvm_opts(rdir: Path) -> list[str]:
    heap = os.environ.get("TABLESTORE_KAFKA_HEAP", "512m")
    return [f"-Xms{heap}", f"-Xmx{heap}", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-Djava.awt.headless=true", f"-Dkafka.logs.dir={rdir / 'logs'}",
            f"-Dlog4j2.configurationFile={rdir / 'log4j2.properties'}"]


def _cluster_id() -> str:
    """A random KRaft cluster id, as Kafka's `Uuid.randomUuid` makes them: URL-safe base64 of 16 bytes that does not
    start with '-' (one in 64 would, and a command line reads it as an option)."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not found.startswith("-"):
            return found


def _format_storage(java: str, libs: Path, rdir: Path, props: Path) -> None:
    id_file = rdir / "cluster.id"
    if not id_file.exists():
        id_file.write_text(_cluster_id())
    cluster_id = id_file.read_text().strip()
    # `--cluster-id=ID`, one argument: an id of an older run that starts with '-' would read as an option
    cmd = [java, *_jvm_opts(rdir), "-cp", f"{libs}/*", "kafka.tools.StorageTool", "format",
           f"--cluster-id={cluster_id}", "-c", str(props), "--ignore-formatted"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-_LOG_TAIL_LINES:])
        raise BrokerStartError(f"formatting the KRaft storage failed (exit {done.returncode})", None, tail)


def _launch(java: str, libs: Path, rdir: Path, props: Path) -> int:
    log_file = rdir / "broker.log"
    with open(log_file, "ab") as out:
        out.write(f"\n==== starting broker at {time.strftime('%Y-%m-%d %H:%M:%S')} ====\n".encode())
        out.flush()
        proc = subprocess.Popen(
            [java, *_jvm_opts(rdir), "-cp", f"{libs}/*", "kafka.Kafka", str(props)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=rdir, start_new_session=True,
        )
    _CHILDREN[proc.pid] = proc
    return proc.pid


def _write_state(rdir: Path, state: _State) -> None:
    tmp = rdir / "state.json.tmp"
    tmp.write_text(json.dumps(asdict(state)))
    os.replace(tmp, rdir / "state.json")


def _live_state(rdir: Path) -> _State | None:
    """The recorded broker if its process still runs; a stale state file is removed."""
    path = rdir / "state.json"
    try:
        state = _State(**json.loads(path.read_text()))
    except (OSError, ValueError, TypeError):
        return None
    if _is_our_broker(state.pid, rdir):
        return state
    path.unlink(missing_ok=True)
    _CHILDREN.pop(state.pid, None)
    return None


def _is_our_broker(pid: int, rdir: Path) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:   # started by this process: its exit status says it all, no reading of /proc
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    if stat.rsplit(")", 1)[-1].split()[0] == "Z":
        return False
    return b"kafka.Kafka" in cmdline and str(rdir / "server.properties").encode() in cmdline


def _answers(bootstrap: str, timeout_s: float) -> bool:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0, "socket.connection.setup.timeout.ms": 2000})
    try:
        return bool(admin.list_topics(timeout=timeout_s).brokers)
    except KafkaException:
        return False


def _wait_ready(bootstrap: str, pid: int, rdir: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if not _is_our_broker(pid, rdir):
            raise BrokerStartError(f"the broker process {pid} {_how_it_ended(pid)}", str(rdir / "broker.log"),
                                   _log_tail(rdir))
        if _answers(bootstrap, min(2.0, max(0.1, deadline - time.monotonic()))):
            return
        if time.monotonic() >= deadline:
            raise BrokerStartError(f"not ready on {bootstrap} after {timeout_s:.0f} s", str(rdir / "broker.log"),
                                   _log_tail(rdir))
        time.sleep(0.1)


def _how_it_ended(pid: int) -> str:
    code = _CHILDREN[pid].returncode if pid in _CHILDREN else None
    if code is None:
        return "exited"
    return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"


def _log_tail(rdir: Path) -> str:
    try:
        lines = (rdir / "broker.log").read_text(errors="replace").splitlines()
    except OSError:
        return "(no broker log)"
    return "\n".join(lines[-_LOG_TAIL_LINES:])


def _terminate(pid: int) -> None:
    """SIGTERM the broker (clean shutdown hook), wait, then SIGKILL; reap it if this process started it."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        log.warning("kafka broker %s ignored SIGTERM for %.0f s; killing it", pid, STOP_GRACE_S)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    child = _CHILDREN.pop(pid, None)
    if child is not None:
        child.wait()


def _alive(pid: int) -> bool:
    child = _CHILDREN.get(pid)
    if child is not None:
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"
