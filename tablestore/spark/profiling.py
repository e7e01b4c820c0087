"""Profiles of the Python side of Spark tasks, for performance work: with the environment variable
`TABLESTORE_SPARK_PROFILE` set to a directory (before the session starts: Python workers inherit the driver's
environment in local mode; `spark.executorEnv.TABLESTORE_SPARK_PROFILE` elsewhere), each write, log and compaction
task, each streaming commit and each catalog-service request dumps a cProfile file there
(`<what>-<pid>-<ns>.prof`; read with `pstats`). Unset: no cost beyond one environment lookup."""
from __future__ import annotations

import cProfile
import os
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

PROFILE_ENV = "TABLESTORE_SPARK_PROFILE"


@contextmanager
def profiled(what: str) -> Iterator[None]:
    """Profile the body into `$TABLESTORE_SPARK_PROFILE/<what>-<pid>-<ns>.prof` when the variable is set."""
    directory = os.environ.get(PROFILE_ENV)
    if not directory:
        yield
        return
    profile = cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        Path(directory).mkdir(parents=True, exist_ok=True)
        profile.dump_stats(str(Path(directory) / f"{what}-{os.getpid()}-{time.time_ns()}.prof"))
