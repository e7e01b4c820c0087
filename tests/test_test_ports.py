"""The test suite runs beside a developer's own broker: the README tells users to `tablestore kafka start` (port
19092), and a worker whose port is taken takes a free pair instead of failing at setup (issue 52)."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

from free_ports import free_port_pair

TESTS = Path(__file__).resolve().parent


def _worker_port(base_port: int, worker: str, tmp_path: Path) -> int:
    env = {**os.environ, "PYTEST_XDIST_WORKER": worker, "TABLESTORE_KAFKA_PORT": str(base_port),
           "TABLESTORE_KAFKA_DIR": str(tmp_path / "kafka-run")}
    code = "import os, conftest; print(os.environ['TABLESTORE_KAFKA_PORT'])"
    out = subprocess.run([sys.executable, "-c", code], cwd=TESTS, env=env, check=True, capture_output=True,
                         text=True, timeout=120)
    return int(out.stdout.strip().splitlines()[-1])


def test_a_worker_leaves_a_taken_port_alone(tmp_path: Path) -> None:
    base = free_port_pair()
    with socket.socket() as held:   # someone else's broker on the worker's usual port
        held.bind(("127.0.0.1", base))
        held.listen()
        port = _worker_port(base, "gw0", tmp_path)
    assert port != base
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))   # the port chosen was free


def test_a_worker_keeps_its_usual_port_when_free(tmp_path: Path) -> None:
    base = free_port_pair()
    assert _worker_port(base, "gw0", tmp_path) == base
