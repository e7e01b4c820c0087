"""The project is mypy-clean (pyproject's [tool.mypy]): checked on every run of the suite, so CI fails on a type error."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("filestore", "catalog", "logstore", "tablestore")


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is in the dev extra")
def test_mypy_finds_no_error() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", *PACKAGES], cwd=ROOT, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, f"mypy found errors:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    assert "Success: no issues found" in done.stdout


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None, reason="mypy is in the dev extra")
def test_mypy_check_sees_an_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("def f(x: int) -> str:\n    return x\n")
    done = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental", str(bad)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 1 and "Incompatible return value type" in done.stdout
