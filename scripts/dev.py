#!/usr/bin/env python3
"""Set up the project from nothing but the system Python, then run the demo or the tests.

    python3 scripts/dev.py demo    # create .venv, install tablestore, run the demo
    python3 scripts/dev.py test    # create .venv, install tablestore with dev extras, run the whole suite
    python3 scripts/dev.py setup   # only the set-up

The set-up is idempotent: it re-installs only when pyproject.toml changed since the last install.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENV = ROOT / ".venv"
PY = VENV / "bin" / "python"
STAMP = VENV / ".tablestore-installed"


def _run(cmd: list[str], **kwargs: object) -> int:
    print("+", " ".join(cmd), flush=True)
    return subprocess.call(cmd, cwd=ROOT, **kwargs)  # type: ignore[arg-type]


def setup() -> None:
    if not PY.exists():
        print(f"creating virtual environment at {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
        if _run([str(PY), "-m", "pip", "install", "--quiet", "--upgrade", "pip"]) != 0:
            sys.exit("pip upgrade failed")
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text() == digest:
        return
    if _run([str(PY), "-m", "pip", "install", "--quiet", "-e", ".[dev]"]) != 0:
        sys.exit("installing tablestore into .venv failed")
    STAMP.write_text(digest)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "test"
    rest = argv[1:]
    setup()
    if command == "setup":
        return 0
    if command == "demo":
        return _run([str(VENV / "bin" / "tablestore"), "demo", *rest])
    if command == "test":
        env = dict(os.environ)
        code = _run([str(PY), "-m", "pytest", *rest], env=env)
        if code == 5:
            print("pytest collected no tests", file=sys.stderr)
        return code
    sys.exit(f"unknown command {command!r}: use demo, test or setup")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
