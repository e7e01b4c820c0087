"""What the development servers of tablestore.cdc (a PostgreSQL server, a Kafka Connect worker) share: their
errors, the run directory's lock and state file, the port check, and how a recorded process is recognised and
stopped. Modelled on logstore/broker.py, whose rules they follow:

1. Fixed ports, never random ones; a port held by something else is a `PortTakenError` naming the port and the
   environment variable that moves it.
2. One server per run directory. ``state.json`` names its pid; it is written only by ``start`` (under the
   directory's ``start.lock``) and removed by ``stop`` or when its pid is found dead or no longer ours.
3. Only the pid recorded in ``state.json`` is ever signalled, and only while its command line still names this run
   directory (`is_ours`).
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from tablestore.errors import TableStoreError

__all__ = ["DevServiceError", "PortTakenError", "ServiceStartError", "ServiceToolMissingError"]

log = logging.getLogger(__name__)

LOG_TAIL_LINES = 40

# Popen objects of servers this process started, so their exit is reaped (no zombies, no ResourceWarning).
CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


class DevServiceError(TableStoreError):
    """A development server (PostgreSQL, Kafka Connect) could not be found, started, stopped or reached."""


class ServiceToolMissingError(DevServiceError):
    """A program or a set of jars a development server needs is not installed; says what to install."""

    def __init__(self, tool: str, hint: str) -> None:
        super().__init__(f"{tool} not found: {hint}")
        self.tool = tool


class PortTakenError(DevServiceError):
    """The fixed port a development server listens on is held by another process."""

    def __init__(self, service: str, port: int, env: str, reason: str) -> None:
        super().__init__(f"{service}: port 127.0.0.1:{port} is taken by another process ({reason}); stop it or "
                         f"choose another port with --port or {env}")
        self.service = service
        self.port = port
        self.env = env


class ServiceStartError(DevServiceError):
    """A development server exited or did not become ready in time. The message is one line: the reason, the log
    file and the log's last error line; `log_tail` keeps the log's last lines."""

    def __init__(self, service: str, reason: str, log_file: Path | None, log_tail: str) -> None:
        last = _last_error_line(log_tail)
        where = f" (see {log_file})" if log_file is not None else ""
        super().__init__(f"{service} did not come up: {reason}{where}" + (f": {last}" if last else ""))
        self.service = service
        self.log_file = None if log_file is None else str(log_file)
        self.log_tail = log_tail


def _last_error_line(tail: str) -> str:
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    for line in reversed(lines):
        if any(word in line for word in ("ERROR", "FATAL", "PANIC", "Exception", "Error:")):
            return line[:300]
    return ""


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created if absent) for the duration of the block."""
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def check_port_free(service: str, port: int, env: str) -> None:
    """Raise `PortTakenError` when 127.0.0.1:`port` cannot be bound."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            raise PortTakenError(service, port, env, exc.strerror or str(exc)) from exc


def write_state(rdir: Path, state: dict[str, Any]) -> None:
    tmp = rdir / "state.json.tmp"
    tmp.write_text(json.dumps(state))
    os.replace(tmp, rdir / "state.json")


def read_state(rdir: Path, ours: Callable[[int], bool]) -> dict[str, Any] | None:
    """The recorded state if its process still runs and `ours(pid)` says it is this directory's; a stale state
    file is removed."""
    path = rdir / "state.json"
    try:
        state = json.loads(path.read_text())
        pid = int(state["pid"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if alive(pid) and ours(pid):
        return dict(state)
    path.unlink(missing_ok=True)
    reap(pid)
    return None


def is_ours(pid: int, program: str, args: Sequence[str]) -> bool:
    """Whether `pid` runs (not a zombie) the executable named `program` with each of `args` as an argument."""
    if not alive(pid):
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return Path(cmdline[0]).name == program and all(arg in cmdline[1:] for arg in args)


def alive(pid: int) -> bool:
    child = CHILDREN.get(pid)
    if child is not None:   # started by this process: its exit status says it all
        return child.poll() is None
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def how_it_ended(pid: int) -> str:
    code = CHILDREN[pid].returncode if pid in CHILDREN else None
    if code is None:
        return "exited"
    return f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"


def reap(pid: int) -> None:
    child = CHILDREN.pop(pid, None)
    if child is not None:
        child.wait()


def log_tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-LOG_TAIL_LINES:])


def terminate(pid: int, *, first: signal.Signals, grace_s: float, then: Sequence[signal.Signals] = ()) -> None:
    """Send `first`, wait up to `grace_s` for the exit, then each of `then` in turn (same wait), then SIGKILL;
    reap the process if this one started it."""
    for sig in (first, *then, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and alive(pid):
            time.sleep(0.05)
        if not alive(pid):
            break
        log.warning("process %s ignored %s for %.0f s", pid, sig.name, grace_s)
    reap(pid)


def launch(cmd: Sequence[str], *, log_file: Path, cwd: Path, user: tuple[int, int] | None = None,
           env: dict[str, str] | None = None) -> int:
    """Start `cmd` in the background in a session of its own, its output appended to `log_file`; as the user
    (uid, gid) when given (the caller is root)."""
    with open(log_file, "ab") as out:
        out.write(f"\n==== starting at {time.strftime('%Y-%m-%d %H:%M:%S')}: {cmd[0]} ====\n".encode())
        out.flush()
        uid, gid = (None, None) if user is None else user
        proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                cwd=cwd, env=env, start_new_session=True, user=uid, group=gid,
                                extra_groups=None if user is None else [])
    CHILDREN[proc.pid] = proc
    return proc.pid


def wait_ready(service: str, pid: int, log_file: Path, answers: Callable[[float], bool], timeout_s: float,
               silence: str, poll_s: float = 0.1) -> None:
    """Until `answers(timeout)` says the process `pid` serves; ServiceStartError naming its log's last error when
    it ends first, or `silence` (what did not answer) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not alive(pid):
            raise ServiceStartError(service, f"the process {pid} {how_it_ended(pid)}", log_file, log_tail(log_file))
        if answers(min(2.0, max(0.5, deadline - time.monotonic()))):
            return
        if time.monotonic() >= deadline:
            raise ServiceStartError(service, f"{silence} after {timeout_s:.0f} s", log_file, log_tail(log_file))
        time.sleep(poll_s)


def ready_unless_ended(pid: int, rdir: Path, wait: Callable[[], None], what: str) -> bool:
    """Wait for a recorded process to be ready (`wait`); False if it ended meanwhile (killed just before this start:
    a new one is to be started), its state file removed."""
    try:
        wait()
        return True
    except ServiceStartError:
        if alive(pid):
            raise
    log.info("the recorded %s %s has just ended; starting a new one", what, pid)
    (rdir / "state.json").unlink(missing_ok=True)
    reap(pid)
    return False
