"""A hung test explains itself: past `TABLESTORE_TEST_WATCHDOG_S` seconds (default 300) a test's watchdog prints
the stacks of the test process's threads, of every JVM it started (`jstack`: Spark's driver, the Kafka broker) and
of every Python process below it (`py-spy dump`: Spark's Python workers), straight to the terminal and to a file
under the system temp dir. pytest-timeout (`timeout` in pyproject.toml) ends the run later; this is what comes
out before it does, so a hang on a CI machine leaves the evidence needed to fix it."""
from __future__ import annotations

import faulthandler
import io
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

DEFAULT_S = 300.0


def watchdog_seconds() -> float:
    return float(os.environ.get("TABLESTORE_TEST_WATCHDOG_S", DEFAULT_S))


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (Linux /proc), parents before children: from each process's parent in
    /proc/*/stat (a thread's `children` file misses a child for a moment when the JVM thread that forked it has just
    ended and the child moves to another thread of the process)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue   # a process that just exited
        parents.setdefault(parent, []).append(int(entry.name))
    out: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def command_of(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def _run(cmd: list[str]) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return done.stdout + done.stderr
    except (OSError, subprocess.SubprocessError) as e:
        return f"{cmd[0]} failed: {e}\n"


def stacks(test: str) -> str:
    """The stacks of this process's threads and of every JVM and Python process below it."""
    out = io.StringIO()
    out.write(f"\n===== watchdog: {test} still running after {watchdog_seconds():.0f} s =====\n")
    with tempfile.TemporaryFile("w+") as f:   # faulthandler writes to a file descriptor
        faulthandler.dump_traceback(file=f, all_threads=True)
        f.seek(0)
        out.write(f"--- this process ({os.getpid()}):\n{f.read()}")
    jstack = shutil.which("jstack") or str(Path(sys.executable).parent / "jstack")
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    for pid in descendants(os.getpid()):
        command = command_of(pid)
        out.write(f"--- process {pid}: {command[:300]}\n")
        if "java" in command.split(" ")[0]:
            out.write(_run([jstack, str(pid)]))
        elif "python" in command.split(" ")[0] and Path(py_spy).exists():
            out.write(_run([py_spy, "dump", "--pid", str(pid)]))
    return out.getvalue()


def start(test: str, report: Callable[[str], None]) -> Callable[[], None]:
    """Arm the watchdog of `test`; returns its disarm. `report` gets the stacks (e.g. the terminal's writer)."""
    done = threading.Event()

    def watch() -> None:
        if done.wait(watchdog_seconds()):
            return
        text = stacks(test)
        path = Path(tempfile.gettempdir()) / f"tablestore-watchdog-{os.getpid()}-{int(time.time())}.txt"
        path.write_text(text)
        report(text + f"===== (also in {path})\n")

    threading.Thread(target=watch, name="test-watchdog", daemon=True).start()
    return done.set
