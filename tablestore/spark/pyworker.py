"""The Python workers PySpark's daemon forks for tablestore's tasks (reads, writes, the materializer, compaction).

PySpark's daemon runs a full `gc.collect()` after every task of a reused worker (`pyspark/daemon.py`). With
tablestore's modules loaded a worker holds about 88,000 objects the collector tracks, nearly all of them the
modules' own, and each such collection scans them all: 20-30 ms of CPU per task (PySpark 4.1, Python 3.11). The
two workers of a local[2] write run theirs at the moment the write commits, on the cores the driver and a
streaming reader of the table need then. `freeze_imports()`, called when a module that tasks load is imported,
moves the objects alive then out of the collector's reach (`gc.freeze`, made for processes that fork workers):
they are still freed when nothing refers to them, only never scanned for cycles again."""
from __future__ import annotations

import gc
import sys


def in_pyspark_worker() -> bool:
    """Whether this process is a worker forked by PySpark's daemon (`python -m pyspark.daemon`)."""
    main = sys.modules.get("__main__")
    return getattr(getattr(main, "__spec__", None), "name", None) == "pyspark.daemon"


def freeze_imports() -> None:
    """In a PySpark worker, freeze the objects alive now (the imported modules'); elsewhere nothing."""
    if in_pyspark_worker():
        gc.freeze()
