"""Fault points for crash tests of processes a test cannot reach into (a Spark driver run as a subprocess, whose
commits run in Python workers the JVM starts).

`fault_point(name)` does nothing unless the environment variable TABLESTORE_FAULT names that point, as
`<point>[@<n>][:<marker file>]`: at the n-th time (default 1) any process of the run reaches it (counted in
`<marker file>.count`, so fresh workers count on), the process stops there. With a marker file it creates that
file and waits forever (the test then kills the whole process group with SIGKILL: a crash of the driver at that
point); without one it kills itself with SIGKILL. Points: `before-snapshot`, `before-log-commit`,
`after-log-commit` (tablestore.writer), `stream-read` (a streaming read's task, tablestore.spark.stream_read),
`log-plans-written` (a Spark commit whose log the executors produce next, tablestore.spark.write),
`log-bucket-producing` and `log-bucket-published` (an executor's log task before and after its transaction
commits, tablestore.log_publish). The marker file holds the point's name and the pid of the process that stopped.
Reading one environment variable costs nanoseconds.
"""
from __future__ import annotations

import os
import signal
import time

FAULT_ENV = "TABLESTORE_FAULT"


def fault_point(name: str) -> None:
    spec = os.environ.get(FAULT_ENV)
    if not spec:
        return
    where, _, marker = spec.partition(":")
    point, _, nth = where.partition("@")
    if point != name:
        return
    if marker:
        with open(marker + ".count", "a+") as f:
            f.write("x")
            f.seek(0)
            reached = len(f.read())
        if reached != int(nth or 1):
            return
        with open(marker, "w") as f:
            f.write(f"{name} {os.getpid()}")
        while True:
            time.sleep(60)
    os.kill(os.getpid(), signal.SIGKILL)
