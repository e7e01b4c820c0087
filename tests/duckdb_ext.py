"""DuckDB with extensions loaded from PyPI: the `duckdb-ext-<name>` wheels ship DuckDB's extension binaries for one
DuckDB version (1.4.4 in the test extra), since DuckDB's own `INSTALL` needs its extension server, which is not a
package registry. A test that needs an extension this environment lacks is skipped, naming what to install."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest


def connect_with(*extensions: str) -> Any:
    """A DuckDB connection with `extensions` loaded from their wheels, or a skip."""
    duckdb = pytest.importorskip("duckdb")
    found: dict[str, Path] = {}
    for entry in sys.path:
        for ext in extensions:
            hits = list(Path(entry).glob(f"duckdb_ext/extensions/v{duckdb.__version__}/*/{ext}.duckdb_extension"))
            if hits and ext not in found:
                found[ext] = hits[0]
    missing = [e for e in extensions if e not in found]
    if missing:
        wheels = " ".join(f"duckdb-ext-{e}" for e in missing)
        pytest.skip(f"no DuckDB {', '.join(missing)} extension for duckdb {duckdb.__version__} "
                    f"(pip install duckdb==1.4.4 {wheels})")
    con = duckdb.connect()
    for ext in extensions:
        con.sql(f"LOAD '{found[ext]}'")
    return con
