"""Dependencies run one way: tablestore -> catalog -> filestore | logstore. Checked on every import statement."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("tablestore", "catalog", "filestore", "logstore")
ALLOWED = {
    "tablestore": {"tablestore", "catalog", "filestore", "logstore"},
    "catalog": {"catalog", "filestore", "logstore"},
    "filestore": {"filestore"},
    "logstore": {"logstore"},
}


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module.split(".")[0]))
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_package_imports_only_what_it_may(package: str) -> None:
    violations = []
    for path in sorted((ROOT / package).rglob("*.py")):
        for line, top in _imports(path):
            if top in PACKAGES and top not in ALLOWED[package]:
                violations.append(f"{path.relative_to(ROOT)}:{line} imports {top}")
    assert not violations, "dependency direction broken:\n" + "\n".join(violations)


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text("import os\nfrom logstore.errors import LogStoreError\n")
    assert (2, "logstore") in _imports(bad)
