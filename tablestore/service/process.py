"""The `tablestore service` process: run in the foreground, or started in the background and stopped like the
development broker (`tablestore kafka start/stop/status`, whose rules it follows: tablestore/cdc/dev_process.py).

1. One service per run directory (`--dir`, `$TABLESTORE_SERVICE_DIR`, default `<cache>/service-run` with the cache
   `$TABLESTORE_CACHE_DIR` or `~/.cache/tablestore`): `state.json` names its pid, port, warehouse and owner id. The
   service writes it itself once its HTTP server listens (under the directory's `start.lock`) and removes it when it
   ends; a state whose pid is dead or no longer a service is stale and removed by whoever reads it.
2. `start` in the background launches the same command in the foreground, its output appended to `service.log`,
   and returns once that process has written its state and answers `/healthz`; a second `start` returns the
   running one. `stop` sends SIGTERM (the service releases its leases and exits), SIGKILL after the grace time.
3. Only the pid recorded in `state.json` is ever signalled, and only while its command line is a tablestore service.
"""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from tablestore.cdc import dev_process as proc
from tablestore.service.runner import Service, ServiceError

log = logging.getLogger(__name__)

DIR_ENV, CACHE_ENV = "TABLESTORE_SERVICE_DIR", "TABLESTORE_CACHE_DIR"
DEFAULT_PORT = 8765
STOP_GRACE_S = 60.0
_NAME = "tablestore service"


@dataclass(frozen=True)
class RunningService:
    pid: int
    port: int
    warehouse: str
    owner: str

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def run_dir(data_dir: Path | None = None) -> Path:
    """The service's state and log directory: `data_dir`, `$TABLESTORE_SERVICE_DIR` or `<cache>/service-run`."""
    if data_dir is not None:
        return Path(data_dir).resolve()
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).resolve()
    cache = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "tablestore").expanduser()
    return (cache / "service-run").resolve()


def _is_service(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return False
    return "service" in args and any(a.endswith("tablestore") or a == "tablestore.cli" for a in args)


def _live(rdir: Path) -> RunningService | None:
    state = proc.read_state(rdir, _is_service)
    if state is None:
        return None
    return RunningService(int(state["pid"]), int(state["port"]), str(state["warehouse"]), str(state["owner"]))


def _answers(url: str, timeout_s: float) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/healthz", timeout=timeout_s) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def serve(service: Service, port: int, data_dir: Path | None = None,
          ready: Callable[[RunningService], None] | None = None) -> None:
    """Run `service` in this process until SIGTERM or SIGINT, with its HTTP server on `port` (rule 1);
    `ready(state)` once it listens."""
    from tablestore.service.server import ServiceServer

    rdir = run_dir(data_dir)
    rdir.mkdir(parents=True, exist_ok=True)
    with proc.locked(rdir / "start.lock"):
        running = _live(rdir)
        if running is not None and running.pid != os.getpid():
            raise ServiceError(f"a service already runs from {rdir} (pid {running.pid}, {running.url}); stop it "
                               f"with `tablestore service stop` or give another --dir")
        proc.check_port_free(_NAME, port, "--port")
        server = ServiceServer(service, port)
        state = RunningService(os.getpid(), server.port, service.config.warehouse, service.owner)
        proc.write_state(rdir, {"pid": state.pid, "port": state.port, "warehouse": state.warehouse,
                                "owner": state.owner, "started_at": time.time()})
    main = threading.current_thread() is threading.main_thread()   # signals reach the main thread only
    previous = {sig: signal.signal(sig, lambda *_: service.stop(timeout_s=0))
                for sig in ((signal.SIGTERM, signal.SIGINT) if main else ())}
    try:
        if ready is not None:
            ready(state)
        service.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.close()
        with proc.locked(rdir / "start.lock"):
            recorded = _live(rdir)
            if recorded is not None and recorded.pid == os.getpid():
                (rdir / "state.json").unlink(missing_ok=True)
        log.info("service %s stopped", service.owner)


def start(command: Sequence[str], data_dir: Path | None = None, timeout_s: float = 60.0) -> RunningService:
    """Launch `command` (the same `tablestore service` in the foreground) in the background (rule 2)."""
    rdir = run_dir(data_dir)
    rdir.mkdir(parents=True, exist_ok=True)
    running = _live(rdir)
    if running is not None and _answers(running.url, 3):
        return running
    pid = proc.launch([sys.executable, "-m", "tablestore.cli", *command], log_file=rdir / "service.log",
                      cwd=Path.cwd(), env=dict(os.environ))
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not proc.alive(pid):
            raise proc.ServiceStartError(_NAME, f"the process {pid} {proc.how_it_ended(pid)}", rdir / "service.log",
                                         proc.log_tail(rdir / "service.log"))
        found = _live(rdir)
        if found is not None and found.pid == pid and _answers(found.url, 2):
            return found
        time.sleep(0.1)
    proc.terminate(pid, first=signal.SIGTERM, grace_s=10)
    raise proc.ServiceStartError(_NAME, f"no answer after {timeout_s:.0f} s", rdir / "service.log",
                                 proc.log_tail(rdir / "service.log"))


def stop(data_dir: Path | None = None) -> bool:
    """Stop the service of this run directory (rule 2); True if one was running and is now stopped."""
    rdir = run_dir(data_dir)
    running = _live(rdir) if rdir.exists() else None
    if running is None:
        return False
    proc.terminate(running.pid, first=signal.SIGTERM, grace_s=STOP_GRACE_S)
    (rdir / "state.json").unlink(missing_ok=True)
    return True


def status(data_dir: Path | None = None) -> RunningService | None:
    """The service of this run directory if it runs and answers, else None."""
    running = _live(run_dir(data_dir))
    if running is None or not _answers(running.url, 3):
        return None
    return running


def describe(running: RunningService | None) -> dict[str, Any]:
    if running is None:
        return {"url": None}
    return {"url": running.url, "metrics": f"{running.url}/metrics", "pid": running.pid, "port": running.port,
            "warehouse": running.warehouse, "owner": running.owner}
